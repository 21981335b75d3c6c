//go:build docker

package e2e

// Issue 29 on rootless Docker: a non-root user (not in the docker group)
// runs doctor, test-sandbox and the offline agent run against its own
// rootless engine (Debian's rootlesskit, uidmap, slirp4netns and
// docker.io's dockerd-rootless.sh; internal/testutil/rootlesshost). The
// engine is recorded rootless; the output goes through its volumes (the
// roles' uid 65532 is a sub-uid of the user here); the bridge, which lives
// in rootlesskit's network namespace, is checked by a helper on the
// network; nothing is left on the engine. Over cgroup v1 the engine runs
// with cgroup driver "none" and enforces no memory, pids or CPU limit:
// mcpsidecar refuses it by default (exit 5) and, accepted with
// MCPSIDECAR_ALLOW_NO_LIMITS=1, test-sandbox's memory-limit probe (G40
// T17) reports the violation (docs/engine-only.md).

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/testutil/rootlesshost"
)

// rlNoLimits reports whether the engine enforces no resource limit (its
// cgroup driver is "none": rootless over cgroup v1).
func rlNoLimits(t *testing.T, eng *rootlesshost.Engine) bool {
	t.Helper()
	return eng.Docker(t, "info", "--format", "{{.CgroupDriver}}") == "none"
}

// rlRun runs the binary as the engine's user with only the engine's
// environment, the test labels and env; it returns the combined output,
// the exit code and how long it took.
func rlRun(t *testing.T, eng *rootlesshost.Engine, bin, id string, env []string, args ...string) (string, int, time.Duration) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = eng.User.HomeDir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "USER=" + eng.User.Username,
		"MCPSIDECAR_LABELS=" + TestLabel + ",mcpsidecar.e2e=" + id}, eng.Env...)
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = eng.Credential()
	start := time.Now()
	out, err := cmd.CombinedOutput()
	return string(out), exitCode(t, err), time.Since(start)
}

// rlCheckRecord: the engine is recorded rootless, amd64 or arm64 as this
// host, local; the verdict passed with every role observed hardened by a
// helper and the bridge checked by a helper on the network; nothing
// degraded beyond the engine's age, the sidecar's upstream (doctor) and,
// on cgroup v1, the limits the user accepted.
func rlCheckRecord(t *testing.T, runDir string, noLimits bool) runs.Metadata {
	t.Helper()
	m := readRunMetadata(t, runDir)
	if !m.Engine.Rootless || m.Engine.Arch == "" || m.Engine.Machine == "" || m.Engine.OS != "linux" {
		t.Errorf("engine %+v: want rootless with its os, arch and machine", m.Engine)
	}
	for _, role := range []string{spec.RoleGateway, spec.RoleSidecar, spec.RoleAgent} {
		if ob := m.Observed[role]; !ob.Seen || ob.Seccomp != 2 || ob.SeccompFilters < 2 || !ob.NoNewPrivs || ob.UID == 0 || strings.Trim(ob.CapEff, "0") != "" {
			t.Errorf("%s observed %+v, want seen hardened through a helper", role, ob)
		}
	}
	bridge := false
	for _, c := range m.Verdict.Checks {
		if strings.HasPrefix(c.Name, "engine's host has no address on") {
			bridge = c.OK
		}
		if strings.HasPrefix(c.Name, "host has no address on") {
			t.Errorf("check %q read this host's interfaces for a bridge in rootlesskit's namespace", c.Name)
		}
		if c.OK && strings.Contains(c.Detail, "not observed") {
			t.Errorf("check %q passed on something not observed: %s", c.Name, c.Detail)
		}
	}
	if !bridge {
		t.Errorf("no passing bridge check through a helper: %+v", m.Verdict.Checks)
	}
	for _, d := range m.Degradations {
		limits := noLimits && strings.Contains(d, "accepted by MCPSIDECAR_ALLOW_NO_LIMITS=1") && strings.Contains(d, `cgroup driver "none"`)
		if !limits && !strings.HasPrefix(d, "Docker Engine ") && !strings.HasPrefix(d, "sidecar upstream disabled") {
			t.Errorf("degradation: %s", d)
		}
	}
	return m
}

// rlNothingLeft: no container, network or volume of the run is on the
// engine.
func rlNothingLeft(t *testing.T, eng *rootlesshost.Engine, id string) {
	t.Helper()
	for _, kind := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}, {"volume", "ls", "-q"}} {
		if left := eng.Docker(t, append(kind, "--filter", "label=mcpsidecar.e2e="+id)...); left != "" {
			t.Errorf("docker %s on the rootless engine: left %s", kind[0], left)
		}
	}
}

func TestRootlessDoctorAndTestSandbox(t *testing.T) {
	NeedDocker(t)
	id := RandHex(6)
	eng := rootlesshost.Start(t)
	noLimits := rlNoLimits(t, eng)
	bin := eoUserBinary(t)
	runsDir := filepath.Join(eng.User.HomeDir, "rootless-runs-"+id)
	t.Cleanup(func() { os.RemoveAll(runsDir); os.RemoveAll(runsDir + "-ts"); os.RemoveAll(runsDir + "-refused") })
	var allow []string
	if noLimits {
		// Refused by default, naming the reason and what to do.
		out, code, _ := rlRun(t, eng, bin, id, nil, "doctor", "--allow-old-engine", "--runs-dir", runsDir+"-refused")
		if code != 5 || !strings.Contains(out, "cannot enforce the roles' memory, process-count (pids), CPU (CFS quota) limits") ||
			!strings.Contains(out, `rootless Docker over cgroup v1 runs with cgroup driver "none"`) || !strings.Contains(out, "MCPSIDECAR_ALLOW_NO_LIMITS=1") {
			t.Errorf("doctor on an engine without limits: exit %d, want 5 naming the dropped limits, why and what to do:\n%s", code, out)
		}
		rlNothingLeft(t, eng, id)
		allow = []string{"MCPSIDECAR_ALLOW_NO_LIMITS=1"}
	}
	out, code, took := rlRun(t, eng, bin, id, allow, "doctor", "--allow-old-engine", "--runs-dir", runsDir)
	if code != 0 {
		t.Fatalf("doctor as %s on the rootless engine exited %d:\n%s", eng.User.Username, code, out)
	}
	t.Logf("doctor on the rootless engine: %s", took.Round(time.Millisecond))
	rlNothingLeft(t, eng, id)
	runDir := hxOnlyRun(t, runsDir)
	m := rlCheckRecord(t, runDir, noLimits)
	if !m.Verdict.OK || len(m.ArtifactProblems) > 0 {
		t.Errorf("verdict %v, artifact problems %v", m.Verdict.OK, m.ArtifactProblems)
	}
	eoCheckOwned(t, runDir, eng.User)

	out, code, _ = rlRun(t, eng, bin, id, allow, "test-sandbox", "--allow-old-engine", "--runs-dir", runsDir+"-ts")
	rlNothingLeft(t, eng, id)
	tsDir := hxOnlyRun(t, runsDir+"-ts")
	violations := rlProbeCounts(t, tsDir)
	want := []string{}
	wantCode := 0
	if noLimits {
		want, wantCode = []string{"G40 T17"}, 4 // "Use memory without limit": the engine set none
	}
	if code != wantCode || !slices.Equal(violations, want) {
		t.Errorf("test-sandbox exited %d with violations %v, want %d with %v:\n%s", code, violations, wantCode, want, hxTail(out, 3000))
	}
	rlCheckProbePass(t, tsDir, "G06", "T12") // the output volume is noexec
	eoCheckOwned(t, tsDir, eng.User)
}

// rlProbeCounts logs test-sandbox's verdicts per category and returns the
// probes that are violations ("G40 T17").
func rlProbeCounts(t *testing.T, runDir string) []string {
	t.Helper()
	groups := rlReport(t, runDir)
	counts := map[string]map[string]int{}
	total := map[string]int{}
	violations := []string{}
	for _, g := range groups {
		counts[g.ID] = map[string]int{}
		for _, c := range g.Capabilities {
			counts[g.ID][c.Verdict]++
			total[c.Verdict]++
			if c.Verdict == "violation" {
				violations = append(violations, g.ID+" "+c.ID)
			}
		}
	}
	ids := make([]string, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%s %v; ", id, counts[id])
	}
	t.Logf("test-sandbox on the rootless engine: %v; per category: %s", total, b.String())
	return violations
}

type rlGroup struct {
	ID           string `json:"id"`
	Capabilities []struct {
		ID      string `json:"id"`
		Verdict string `json:"verdict"`
	} `json:"capabilities"`
}

func rlReport(t *testing.T, runDir string) []rlGroup {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var groups []rlGroup
	if err := json.Unmarshal(b, &groups); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	return groups
}

// rlCheckProbePass: the report has the probe and its verdict is pass.
func rlCheckProbePass(t *testing.T, runDir, group, probeID string) {
	t.Helper()
	for _, g := range rlReport(t, runDir) {
		for _, c := range g.Capabilities {
			if g.ID == group && c.ID == probeID {
				if c.Verdict != "pass" {
					t.Errorf("probe %s %s: verdict %q, want pass", group, probeID, c.Verdict)
				}
				return
			}
		}
	}
	t.Errorf("report.json has no probe %s %s", group, probeID)
}

// TestRootlessAgentRun: the offline agent run as the rootless engine's
// user, the fixtures on that engine: the record checks of the Docker e2e
// (answer, audit, decisions, timeline, no secret, nothing left).
func TestRootlessAgentRun(t *testing.T) {
	NeedDocker(t)
	eng := rootlesshost.Start(t)
	t.Setenv("DOCKER_HOST", eng.Host) // the fixtures, the image and the checks: that engine
	s := agPrepare(t)
	rlGiveTo(t, eng, s.dir)
	s.sys = eng.Credential()
	// The fixtures stay on the run's network until the sidecar has ended:
	// on this engine the sidecar's upstream session, cut when the learn
	// fixture left at the agent's end, was opened again before the
	// sidecar stopped, and the gateway (rightly) denied a name that no
	// longer resolved.
	s.leaveOn = "sidecar"
	s.env = append(slices.Clone(eng.Env), "USER="+eng.User.Username)
	if rlNoLimits(t, eng) {
		s.env = append(s.env, "MCPSIDECAR_ALLOW_NO_LIMITS=1")
	}
	r := s.run(t, "task")
	if r.err != nil {
		t.Fatalf("mcpsidecar run as %s: %v\nstdout:\n%s", eng.User.Username, r.err, r.stdout)
	}
	runDir := agOnlyRunDir(t, r.runsDir)
	agCheckAnswer(t, runDir, r.stdout)
	search := agCheckAudit(t, runDir)
	agCheckDecisions(t, runDir, search)
	checkTimelineLinksSearch(t, runDir, agLearnHost)
	agCheckNoSecret(t, runDir, s.key)
	agCheckNothingLeft(t, r.id)
	rlNothingLeft(t, eng, r.id)
	eoCheckOwned(t, runDir, eng.User)
	m := hxReadMeta(t, runDir)
	if !m.Verdict.OK {
		t.Errorf("verdict failed: %+v", m.Verdict)
	}
}

// rlGiveTo hands dir (the test's binary, CA, spec, runs) to the engine's
// user, and lets it through dir's parents.
func rlGiveTo(t *testing.T, eng *rootlesshost.Engine, dir string) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, eng.UID, eng.GID)
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := filepath.Dir(dir); p != "/" && p != "."; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(p, st.Mode().Perm()|0o001); err != nil {
				t.Fatal(err)
			}
		}
	}
}
