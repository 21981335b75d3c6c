//go:build docker

package e2e

// The backend conformance suite (issue 28, item 6): one set of lifecycle
// scenarios, written once, that each real backend runs
// (conformance_docker_test.go on the engine here,
// conformance_kube_test.go on the test cluster). Each scenario drives
// the test binary's doctor, with the workload replaced by a sleeper or
// the gateway by one that cannot start where it needs to, and asserts on
// the real record (the run directory) and on the real backend's state
// (what a run left, listed by the labels the test gave it). What one
// backend does differently is data in its backendUnderTest (the record
// files only it writes, the phases it reports, what it refuses), so a new
// difference fails the test instead of passing unnoticed.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
	"github.com/mcpsidecar/mcpsidecar/internal/verdict"
)

// backendUnderTest is one real backend as the conformance scenarios see
// it: how the CLI is pointed at it, how what a run left on it is listed,
// how long it may take, and what it records or refuses unlike the others.
type backendUnderTest struct {
	name string
	// flags select the backend on run, doctor and test-sandbox; gcFlags
	// on gc.
	flags, gcFlags []string
	// leftovers lists what runs labelled mcpsidecar.e2e=id left on the
	// backend, one "kind name" entry each, sorted.
	leftovers func(t *testing.T, id string) []string
	// cleanup removes everything labelled mcpsidecar.e2e=id at the end
	// of the test; registered before anything is created.
	cleanup func(t *testing.T, id string)
	// running matches the progress line on stderr that says the workload
	// has started.
	running *regexp.Regexp
	// objects is how many entries leftovers lists for one live run.
	objects int
	// startWait bounds a run until its workload runs; endWait a run's end
	// after a signal or its --timeout.
	startWait, endWait time.Duration
	// phases are doctor's phases on this backend, in order.
	phases []string
	// recordOnly are the files of a doctor run directory that only this
	// backend writes, each with why; recordLacks the common ones it does
	// not write.
	recordOnly, recordLacks map[string]string
	// gatewayFails is how a run whose gateway exits at start fails on
	// this backend.
	gatewayFails startFailure
	// timedOutExit is the workload's exit code in the record of a run
	// past its --timeout ("none": not recorded).
	timedOutExit string
	// refuses are the scenarios this backend cannot express: the command
	// is refused, and the scenario checks that refusal instead.
	refuses map[string]refusal
}

// refusal is a scenario a backend cannot express: why, the doctor
// arguments that ask for it, and the usage error the CLI gives (so
// support added silently fails the scenario until the data changes).
type refusal struct {
	reason  string
	args    []string
	message string
}

// startFailure is how a run whose gateway exits at start (an unknown
// flag) fails: its exit code, what its error line says beside the
// role's name, and whether the gateway's own complaint is shown.
type startFailure struct {
	code        int
	says        []string
	showsOutput bool
}

// cfRecord is the set of files (relative paths) of a doctor run
// directory, on every backend, before each backend's own differences.
var cfRecord = []string{
	"Dockerfile", "config.json", "egress-decisions.jsonl", "gateway-logs.json", "gateway-start-results.json",
	"landlock-policy.json", "mcp-sidecar-logs.json", "mcp-sidecar-metadata.json", "mcp-sidecar-start-results.json",
	"mcp-sidecar-stderr.txt", "mcp-sidecar-stdout.txt", "mcp-sidecar-tool-calls.jsonl", "resolved-profile.json",
	"run-metadata.json", "sandbox-spec.json", "seccomp-profile.json", "squid.conf", "stderr.txt", "stdout.txt",
	"timeline.jsonl", "report.html", "egress-counts.json",
	"gateway-harden-report.json", "sidecar-harden-report.json", "agent-harden-report.json",
	// Each role's output directory: on Docker bind-mounted into its
	// container, on Kubernetes filled from the pod's volume through the
	// API (kubebackend's readOutput), before the files are collected.
	"agent/harden-report.json", "gateway/harden-report.json", "gateway/egress-counts.json",
	"gateway/egress-decisions.jsonl", "sidecar/harden-report.json", "sidecar/mcp-sidecar-tool-calls.jsonl",
}

// cfMayBeEmpty are the record files of doctor that may be empty: the
// sidecar prints nothing on stdout, and doctor's check prints only on
// stdout. Every other file has content.
var cfMayBeEmpty = []string{"mcp-sidecar-stdout.txt", "stderr.txt"}

// cfScenario is one scenario of the suite.
type cfScenario struct {
	name string
	run  func(t *testing.T, b backendUnderTest)
}

// conformanceScenarios are the scenarios, in the order they run.
var conformanceScenarios = []cfScenario{
	{"doctor", cfDoctor},
	{"interrupted", cfInterrupted},
	{"timeout", cfTimeout},
	{"gateway-fails", cfGatewayFails},
	{"keep", cfKeep},
	{"gc-after-sigkill", cfGCAfterKill},
}

// runConformance runs every scenario against b.
func runConformance(t *testing.T, b backendUnderTest) {
	for name := range b.refuses {
		if !slices.ContainsFunc(conformanceScenarios, func(s cfScenario) bool { return s.name == name }) {
			t.Errorf("%s refuses %q, which is no scenario of the suite: fix the suite's data", b.name, name)
		}
	}
	for _, s := range conformanceScenarios {
		t.Run(s.name, func(t *testing.T) {
			start := time.Now()
			defer func() { t.Logf("%s on %s: %s", s.name, b.name, time.Since(start).Round(time.Millisecond)) }()
			if r, ok := b.refuses[s.name]; ok {
				cfRefused(t, b, r)
				return
			}
			s.run(t, b)
		})
	}
}

// cfRun is one command of the binary under test against b, with its
// resources labelled mcpsidecar.e2e=id; its run directory is the one
// entry of runsDir that was not there before it.
type cfRun struct {
	*CLI
	id, runsDir string
	before      map[string]bool
	made        string // the run directory, once found
}

// cfCommand prepares `mcpsidecar command <b's flags> --runs-dir DIR
// args...` for a fresh id and runs directory, whose leftovers are removed
// at the end of the test.
func cfCommand(t *testing.T, b backendUnderTest, command string, args ...string) *cfRun {
	t.Helper()
	return cfCommandIn(t, b, filepath.Join(t.TempDir(), "runs"), command, args...)
}

// cfCommandIn is [cfCommand] in a runs directory other runs may share.
func cfCommandIn(t *testing.T, b backendUnderTest, runsDir, command string, args ...string) *cfRun {
	t.Helper()
	id := RandHex(6)
	b.cleanup(t, id)
	full := append(append([]string{command}, b.flags...), "--allow-old-engine", "--runs-dir", runsDir)
	// The test binary: the workload and the gateway are replaced in
	// some scenarios, and every scenario runs the same binary.
	BinaryWithTestCommands(t)
	c := NewCLI(t, id, nil, append(full, args...)...)
	before := map[string]bool{}
	entries, _ := os.ReadDir(runsDir) // none yet is fine
	for _, e := range entries {
		before[e.Name()] = true
	}
	return &cfRun{CLI: c, id: id, runsDir: runsDir, before: before}
}

// run runs the command to its end and returns its exit code.
func (r *cfRun) run(t *testing.T) int {
	t.Helper()
	start := time.Now()
	code := exitCode(t, r.Cmd.Run())
	t.Logf("%s: exit %d after %s", strings.Join(r.Cmd.Args[1:], " "), code, time.Since(start).Round(time.Millisecond))
	return code
}

// start starts the command and waits until its workload runs.
func (r *cfRun) start(t *testing.T, b backendUnderTest) {
	t.Helper()
	if err := r.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r.Cmd.ProcessState == nil {
			_ = r.Cmd.Process.Kill()
			_ = r.Cmd.Wait()
		}
	})
	deadline := time.Now().Add(b.startWait)
	for !b.running.MatchString(r.Stderr.String()) {
		if r.Cmd.ProcessState != nil || time.Now().After(deadline) {
			t.Fatalf("the workload did not start within %s (%s); stderr:\n%s", b.startWait, b.running, r.Stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.dir(t) // found now, before another run shares its runs directory
}

// cfSleeper starts doctor with a workload that sleeps for an hour, in
// runsDir ("": one of its own), and waits until the workload runs.
func cfSleeper(t *testing.T, b backendUnderTest, runsDir string, args ...string) *cfRun {
	t.Helper()
	args = append([]string{"--x-workload-cmd", "x-sleep,1h"}, args...)
	var r *cfRun
	if runsDir == "" {
		r = cfCommand(t, b, "doctor", args...)
	} else {
		r = cfCommandIn(t, b, runsDir, "doctor", args...)
	}
	r.start(t, b)
	return r
}

// dir is the run directory the command made.
func (r *cfRun) dir(t *testing.T) string {
	t.Helper()
	if r.made != "" {
		return r.made
	}
	entries, err := os.ReadDir(r.runsDir)
	if err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, e := range entries {
		if !r.before[e.Name()] {
			made = append(made, e.Name())
		}
	}
	if len(made) != 1 {
		t.Fatalf("want one new run directory in %s, got %v", r.runsDir, made)
	}
	r.made = filepath.Join(r.runsDir, made[0])
	return r.made
}

// runDir is the run directory the command made, and its metadata.
func (r *cfRun) runDir(t *testing.T) (string, runs.Metadata) {
	t.Helper()
	dir := r.dir(t)
	return dir, readRunMetadata(t, dir)
}

// nothingLeft fails when the run left anything on the backend.
func (r *cfRun) nothingLeft(t *testing.T, b backendUnderTest) {
	t.Helper()
	if left := b.leftovers(t, r.id); len(left) > 0 {
		t.Errorf("%s left behind: %v", b.name, left)
	}
}

// cfDoctor: doctor passes, leaves nothing, and its run directory holds
// the common record files plus this backend's documented differences,
// nothing else; its phases are the backend's; the roles stopped in the
// plan's order.
func cfDoctor(t *testing.T, b backendUnderTest) {
	r := cfCommand(t, b, "doctor")
	if code := r.run(t); code != exitcode.OK {
		t.Fatalf("doctor exited %d\nstdout:\n%s\nstderr:\n%s", code, r.Stdout.String(), r.Stderr.String())
	}
	r.nothingLeft(t, b)
	dir, m := r.runDir(t)
	if m.Command != "doctor" || m.ExitCode != 0 || !m.Verdict.OK || len(m.ArtifactProblems) > 0 {
		t.Errorf("metadata: command %q exit %d verdict %v artifact problems %q", m.Command, m.ExitCode, m.Verdict.OK, m.ArtifactProblems)
	}
	for _, ck := range m.Verdict.Checks {
		if !ck.OK {
			t.Errorf("check %q failed: %s", ck.Name, ck.Detail)
		}
	}
	t.Run("record", func(t *testing.T) { cfCheckRecordFiles(t, b, dir) })
	t.Run("phases", func(t *testing.T) {
		var got []string
		for _, p := range m.Phases {
			got = append(got, p.Name)
		}
		if !slices.Equal(got, b.phases) {
			t.Errorf("phases %v, want %v", got, b.phases)
		}
	})
	t.Run("stop-order", func(t *testing.T) { cfCheckStopOrder(t, dir, m) })
}

// cfCheckRecordFiles: the run directory's regular files are exactly the
// common set with the backend's own added and its lacks removed.
func cfCheckRecordFiles(t *testing.T, b backendUnderTest, dir string) {
	t.Helper()
	want := map[string]bool{}
	for _, f := range cfRecord {
		want[f] = true
	}
	for f := range b.recordLacks {
		if !want[f] {
			t.Errorf("%s's record lacks %s, which is not a common record file: fix the suite's data", b.name, f)
		}
		delete(want, f)
	}
	for f := range b.recordOnly {
		if want[f] {
			t.Errorf("%s's own record file %s is a common one: fix the suite's data", b.name, f)
		}
		want[f] = true
	}
	got := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		got[rel] = true
		if !d.Type().IsRegular() {
			t.Errorf("%s is %s, not a regular file", rel, d.Type())
			return nil
		}
		if info, err := d.Info(); err != nil {
			return err
		} else if info.Size() == 0 && !slices.Contains(cfMayBeEmpty, rel) {
			t.Errorf("%s: %s is empty", b.name, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f := range want {
		if !got[f] {
			t.Errorf("%s: no %s in the run directory", b.name, f)
		}
	}
	for f := range got {
		if !want[f] {
			t.Errorf("%s: %s is in the run directory, and neither a common record file nor a documented difference of this backend", b.name, f)
		}
	}
}

// cfCheckStopOrder reads the order the roles ended in from the record.
// The plan's order for doctor: the workload ends first, then the services
// are stopped (SIGTERM, together: no step of doctor's plan has
// stop_after) and each ends by itself. Neither backend records when each
// role ended (run-metadata.json has no end time per container, and the
// sidecar logs nothing as it stops), so the order is read from what both
// do record: timeline.jsonl's container_exit events; the gateway's own
// last line, "decision log closed", logged as it exits on its SIGTERM,
// which must come after the workload's last request through it (the
// last line of egress-decisions.jsonl: in doctor every request is the
// workload's check); each service's exit code; and the verdict's check
// that the roles stopped before the kill.
func cfCheckStopOrder(t *testing.T, dir string, m runs.Metadata) {
	t.Helper()
	exits := cfExitEvents(t, dir)
	var roles []string
	for _, c := range m.Containers {
		roles = append(roles, c.Role)
		if _, ok := exits[c.Role]; !ok {
			t.Errorf("timeline.jsonl has no container_exit for %s", c.Role)
		}
		if c.Role != "agent" && (c.ExitCode == nil || *c.ExitCode != 0) {
			t.Errorf("%s exit code %s, want 0 (it ends by itself on its SIGTERM)", c.Role, fmtExit(c.ExitCode))
		}
	}
	slices.Sort(roles)
	if !slices.Equal(roles, []string{"agent", "gateway", "sidecar"}) {
		t.Fatalf("containers %v, want agent, gateway and sidecar", roles)
	}
	agent := exits["agent"]
	for _, svc := range []string{"gateway", "sidecar"} {
		if e := exits[svc]; e.Seq < agent.Seq {
			t.Errorf("timeline: %s ended (seq %d, %s) before the workload (seq %d, %s)", svc, e.Seq, e.Time, agent.Seq, agent.Time)
		}
	}
	lastRequest := cfLastDecision(t, dir)
	closed, ok := cfLogLine(t, filepath.Join(dir, runs.FileGatewayLogs), "decision log closed")
	switch {
	case !ok:
		t.Errorf("%s has no \"decision log closed\" line: the gateway did not end by itself", runs.FileGatewayLogs)
	case closed.Before(lastRequest):
		t.Errorf("the gateway closed its log at %s, before the workload's last request through it (%s): it was stopped first",
			closed.Format(time.TimeOnly+".000"), lastRequest.Format(time.TimeOnly+".000"))
	}
	if !slices.ContainsFunc(m.Verdict.Checks, func(c runs.Check) bool { return c.Name == verdict.CheckRolesStopped && c.OK }) {
		t.Errorf("no passed %q check in the verdict: %+v", verdict.CheckRolesStopped, m.Verdict.Checks)
	}
	t.Logf("the workload's last request %s; the gateway closed its log %s", lastRequest.Format(time.TimeOnly+".000"), closed.Format(time.TimeOnly+".000"))
}

// cfLastDecision is the time of the last line of egress-decisions.jsonl.
func cfLastDecision(t *testing.T, dir string) time.Time {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "egress-decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var d struct {
			Time time.Time `json:"time"`
		}
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("egress-decisions.jsonl:%d: %v", i+1, err)
		}
		if d.Time.After(last) {
			last = d.Time
		}
	}
	if last.IsZero() {
		t.Fatal("egress-decisions.jsonl has no decision: doctor's checks go through the gateway")
	}
	return last
}

// cfLogLine is the time of the first line of a role's *-logs.json (its
// JSON log lines, on either stream: the Kubernetes API merges the two)
// whose message is msg.
func cfLogLine(t *testing.T, path, msg string) (time.Time, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ Stdout, Stderr string }
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, line := range strings.Split(rec.Stdout+"\n"+rec.Stderr, "\n") {
		var l struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == msg {
			return l.Time, true
		}
	}
	return time.Time{}, false
}

// cfExitEvents are timeline.jsonl's container_exit events by role.
func cfExitEvents(t *testing.T, dir string) map[string]timeline.Event {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]timeline.Event{}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e timeline.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("timeline.jsonl:%d: %v", i+1, err)
		}
		if e.Kind == timeline.KindContainerExit {
			out[e.Role] = e
		}
	}
	return out
}
