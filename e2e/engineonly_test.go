//go:build docker

package e2e

// Output and observation through the engine's API alone (issue 29): each
// role's output in a tmpfs volume of the engine, read through an exec in
// the holder; held roles released through it; the default route of an old
// engine removed, and each role's hardening observed, by helpers that join
// only the role's namespace. The same record checks as the bind-mount
// runs, as root (MCPSIDECAR_OUTPUT=volume) and as a user in the docker
// group with no environment variable at all.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// eoObserved is run-metadata.json's outside observation of each role.
type eoObserved struct {
	Observed map[string]struct {
		Seen           bool   `json:"seen"`
		Seccomp        int    `json:"seccomp"`
		SeccompFilters int    `json:"seccomp_filters"`
		NoNewPrivs     bool   `json:"no_new_privs"`
		CapEff         string `json:"cap_eff"`
		UID            int    `json:"uid"`
		Detail         string `json:"detail"`
	} `json:"observed"`
}

// eoCheckObserved: every role was seen from outside, hardened (two
// seccomp filters at least, no_new_privs, no capability, not root).
func eoCheckObserved(t *testing.T, runDir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "run-metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m eoObserved
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"gateway", "sidecar", "agent"} {
		o, ok := m.Observed[role]
		if !ok || !o.Seen || o.Seccomp != 2 || o.SeccompFilters < 2 || !o.NoNewPrivs || strings.Trim(o.CapEff, "0") != "" || o.UID == 0 {
			t.Errorf("%s seen from outside: %+v (present %v); want seen, seccomp 2 with 2+ filters, no_new_privs, no capability, not root", role, o, ok)
		}
	}
}

// eoCheckDegradations: nothing degraded beyond the engine's own age and
// the sidecar's upstream, off in doctor and test-sandbox.
func eoCheckDegradations(t *testing.T, m hxMeta) {
	t.Helper()
	for _, d := range m.Degradations {
		if !strings.HasPrefix(d, "Docker Engine ") && !strings.HasPrefix(d, "sidecar upstream disabled") {
			t.Errorf("degradation: %s", d)
		}
	}
}

func TestVolumeOutputDoctorAndTestSandbox(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	env := []string{"MCPSIDECAR_OUTPUT=volume"}
	c, code := RunCLI(t, id, env, "doctor", "--allow-old-engine", "--runs-dir", runsDir)
	if code != 0 {
		t.Fatalf("doctor exited %d\nstdout:\n%s\nstderr:\n%s", code, c.Stdout.String(), c.Stderr.String())
	}
	RequireNothingLeft(t, label)
	runDir := hxOnlyRun(t, runsDir)
	for _, name := range hxDoctorArtifacts {
		hxWellFormed(t, filepath.Join(runDir, name))
	}
	m := hxReadMeta(t, runDir)
	if !m.Verdict.OK || m.ExitCode != 0 || len(m.ArtifactProblems) > 0 {
		t.Errorf("verdict %v exit %d artifact problems %v", m.Verdict.OK, m.ExitCode, m.ArtifactProblems)
	}
	if strings.Contains(c.Stderr.String(), "keeps the default route") {
		t.Errorf("a container kept its default route:\n%s", c.Stderr.String())
	}
	hxCheckHardening(t, m, c.Stderr.String())
	eoCheckObserved(t, runDir)
	eoCheckDegradations(t, m)

	ts := filepath.Join(t.TempDir(), "ts")
	c, code = RunCLI(t, id, env, "test-sandbox", "--allow-old-engine", "--runs-dir", ts)
	if code != 0 {
		t.Errorf("test-sandbox exited %d (4: a violation); stderr tail:\n%s", code, hxTail(c.Stderr.String(), 3000))
	}
	RequireNothingLeft(t, label)
	eoCheckProbe(t, hxOnlyRun(t, ts), "G06", "T12")
}

// eoCheckProbe: the probe report has group's probe and its verdict is
// pass, and no probe is a violation.
func eoCheckProbe(t *testing.T, runDir, group, probeID string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var groups []struct {
		ID           string `json:"id"`
		Capabilities []struct {
			ID      string `json:"id"`
			Verdict string `json:"verdict"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(b, &groups); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	found := false
	for _, g := range groups {
		for _, c := range g.Capabilities {
			if c.Verdict == "violation" {
				t.Errorf("probe %s %s: violation", g.ID, c.ID)
			}
			if g.ID == group && c.ID == probeID {
				found = true
				if c.Verdict != "pass" {
					t.Errorf("probe %s %s: verdict %q, want pass", group, probeID, c.Verdict)
				}
			}
		}
	}
	if !found {
		t.Errorf("report.json has no probe %s %s", group, probeID)
	}
}

// eoUser is a non-root user in the docker group (made once per machine):
// the usual Linux setup.
func eoUser(t *testing.T) *user.User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test makes a user of the docker group: run it as root")
	}
	const name = "mcpsidecar-e2e"
	u, err := user.Lookup(name)
	if err != nil {
		if out, err := exec.Command("useradd", "--create-home", "--groups", "docker", name).CombinedOutput(); err != nil {
			t.Fatalf("useradd: %v: %s", err, out)
		}
		if u, err = user.Lookup(name); err != nil {
			t.Fatal(err)
		}
	}
	return u
}

// eoRunAs runs the binary as u with a clean environment (no MCPSIDECAR_*
// variable at all but the test labels) and returns its exit code.
func eoRunAs(t *testing.T, u *user.User, bin, id string, args ...string) (string, int) {
	t.Helper()
	return eoRunAsEnv(t, u, bin, id, nil, args...)
}

// eoRunAsEnv is eoRunAs with env added (an engine elsewhere's DOCKER_*).
func eoRunAsEnv(t *testing.T, u *user.User, bin, id string, env []string, args ...string) (string, int) {
	t.Helper()
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dg, err := user.LookupGroup("docker")
	if err != nil {
		t.Fatal(err)
	}
	dgid, _ := strconv.Atoi(dg.Gid)
	cmd := exec.Command(bin, args...)
	cmd.Dir = u.HomeDir
	cmd.Env = []string{"HOME=" + u.HomeDir, "PATH=/usr/bin:/bin", "USER=" + u.Username,
		"MCPSIDECAR_LABELS=" + TestLabel + ",mcpsidecar.e2e=" + id}
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{uint32(dgid)}}}
	out, err := cmd.CombinedOutput()
	return string(out), exitCode(t, err)
}

func TestNonRootUserInDockerGroup(t *testing.T) {
	id, _, label := hxSetup(t)
	u := eoUser(t)
	bin := eoUserBinary(t)
	runsDir := filepath.Join(u.HomeDir, "e2e-runs-"+id)
	t.Cleanup(func() { os.RemoveAll(runsDir) })

	out, code := eoRunAs(t, u, bin, id, "doctor", "--allow-old-engine", "--runs-dir", runsDir)
	if code != 0 {
		t.Fatalf("doctor as %s exited %d:\n%s", u.Username, code, out)
	}
	RequireNothingLeft(t, label)
	runDir := hxOnlyRun(t, runsDir)
	m := hxReadMeta(t, runDir)
	if !m.Verdict.OK || len(m.ArtifactProblems) > 0 {
		t.Errorf("verdict %v, artifact problems %v", m.Verdict.OK, m.ArtifactProblems)
	}
	eoCheckDegradations(t, m)
	eoCheckObserved(t, runDir)
	eoCheckOwned(t, runDir, u)

	out, code = eoRunAs(t, u, bin, id, "test-sandbox", "--allow-old-engine", "--runs-dir", runsDir+"-ts")
	t.Cleanup(func() { os.RemoveAll(runsDir + "-ts") })
	if code != 0 {
		t.Errorf("test-sandbox as %s exited %d:\n%s", u.Username, code, hxTail(out, 3000))
	}
	RequireNothingLeft(t, label)
	eoCheckProbe(t, hxOnlyRun(t, runsDir+"-ts"), "G06", "T12")
}

// eoCheckOwned: every file of the run directory belongs to the user who
// ran it, and the directory is theirs alone.
func eoCheckOwned(t *testing.T, runDir string, u *user.User) {
	t.Helper()
	if st, err := os.Stat(runDir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("run directory %s: mode %v (%v), want 0700", runDir, st.Mode().Perm(), err)
	}
	err := filepath.Walk(runDir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fmt.Sprint(st.Uid) != u.Uid {
			t.Errorf("%s is owned by uid %d, not %s (%s)", p, st.Uid, u.Uid, u.Username)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// eoUserBinary is a copy of the binary under test where any user can run
// it.
func eoUserBinary(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mcpsidecar-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "mcpsidecar")
	eoCopy(t, Binary(t), bin)
	return bin
}

func eoCopy(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestVolumeOutputAgentRun(t *testing.T) {
	NeedDocker(t)
	s := agPrepare(t)
	s.env = []string{"MCPSIDECAR_OUTPUT=volume"}
	r := s.run(t, "task")
	if r.err != nil {
		t.Fatalf("mcpsidecar run: %v\nstdout:\n%s", r.err, r.stdout)
	}
	runDir := agOnlyRunDir(t, r.runsDir)
	agCheckAnswer(t, runDir, r.stdout)
	search := agCheckAudit(t, runDir)
	agCheckDecisions(t, runDir, search)
	checkTimelineLinksSearch(t, runDir, agLearnHost)
	agCheckNoSecret(t, runDir, s.key)
	agCheckNothingLeft(t, r.id)
	eoCheckObserved(t, runDir)
}

// TestVolumeOutputOwnWorkload: a user's workload image on the engine-only
// path runs under the launcher our holder copied into its volume (never a
// bind of this host's binary): the launcher's layers are enforced, the
// workload is observed hardened from outside, the verdict passes, and the
// launcher volume is gone with the rest.
func TestVolumeOutputOwnWorkload(t *testing.T) {
	NeedDocker(t)
	s := agPrepare(t)
	s.env = []string{"MCPSIDECAR_OUTPUT=volume"}
	image := probeWorkloadImage(t, s.dir)
	r := s.runWith(t, "task", "--image", image, "--pull", "never")
	if r.err != nil {
		t.Fatalf("mcpsidecar run: %v\nstdout:\n%s", r.err, r.stdout)
	}
	runDir := agOnlyRunDir(t, r.runsDir)
	ok, checks := wlVerdict(t, runDir)
	if !ok {
		t.Errorf("verdict failed: %v", checks)
	}
	if !strings.HasPrefix(checks["agent hardening seen from outside"], "ok") {
		t.Errorf("agent hardening seen from outside: %q", checks["agent hardening seen from outside"])
	}
	if layers := wlHardenReport(t, runDir); !layers["no-spawn"] || !layers["landlock-fs"] || !layers["syscall-deny"] {
		t.Errorf("launcher layers %v: want no-spawn, landlock-fs and syscall-deny enforced", layers)
	}
	agCheckNothingLeft(t, r.id)
}
