//go:build docker

package e2e

// The conformance scenarios (conformance_test.go) on the paths that end a
// run other than by success: a refusal, SIGINT, the timeout, a role that
// cannot start, --keep, and gc after the host process was killed.

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// cfRefused: the backend refuses the scenario's command with the
// documented usage error, and leaves nothing.
func cfRefused(t *testing.T, b backendUnderTest, r refusal) {
	t.Logf("%s cannot express this scenario: %s", b.name, r.reason)
	run := cfCommand(t, b, "doctor", r.args...)
	code := run.run(t)
	if code != exitcode.Usage || !strings.Contains(run.Stderr.String(), r.message) {
		t.Errorf("exit %d, want %d with %q; stderr:\n%s", code, exitcode.Usage, r.message, run.Stderr.String())
	}
	run.nothingLeft(t, b)
}

// cfInterrupted: SIGINT while the workload runs ends the run with 130
// (docs/commands.md), writes its record with that code, and leaves
// nothing.
func cfInterrupted(t *testing.T, b backendUnderTest) {
	r := cfSleeper(t, b, "")
	if left := b.leftovers(t, r.id); len(left) != b.objects {
		t.Errorf("while the workload runs: %v, want %d objects (the check after SIGINT would prove nothing)", left, b.objects)
	}
	if err := r.Cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := hxWait(t, r.CLI, b.endWait); code != exitcode.Interrupted {
		t.Errorf("exit code %d after SIGINT, want %d; stderr:\n%s", code, exitcode.Interrupted, r.Stderr.String())
	}
	r.nothingLeft(t, b)
	dir, m := r.runDir(t)
	if m.ExitCode != exitcode.Interrupted {
		t.Errorf("run-metadata.json exit_code %d, want %d", m.ExitCode, exitcode.Interrupted)
	}
	for _, name := range []string{"run-metadata.json", "timeline.jsonl", "stdout.txt", "gateway-logs.json", "mcp-sidecar-logs.json", "report.html"} {
		hxWellFormed(t, filepath.Join(dir, name))
	}
}

// cfTimeout: a workload that outlives --timeout is killed, the run exits
// 1 (docs/commands.md), records the agent as timed out, and leaves
// nothing.
func cfTimeout(t *testing.T, b backendUnderTest) {
	r := cfCommand(t, b, "doctor", "--x-workload-cmd", "x-sleep,1h", "--timeout", "5s")
	start := time.Now()
	code := r.run(t)
	if code != exitcode.Runtime {
		t.Errorf("exit code %d, want %d; stderr:\n%s", code, exitcode.Runtime, r.Stderr.String())
	}
	if d := time.Since(start); d > b.startWait+b.endWait {
		t.Errorf("took %s: the timeout did not stop the workload", d)
	}
	r.nothingLeft(t, b)
	_, m := r.runDir(t)
	if m.ExitCode != exitcode.Runtime {
		t.Errorf("run-metadata.json exit_code %d, want %d", m.ExitCode, exitcode.Runtime)
	}
	found := false
	for _, c := range m.Containers {
		if c.Role == "agent" {
			found = true
			if !c.TimedOut || fmtExit(c.ExitCode) != b.timedOutExit {
				t.Errorf("the agent's record: timed_out %v, exit code %s; want timed out, exit code %s", c.TimedOut, fmtExit(c.ExitCode), b.timedOutExit)
			}
		}
	}
	if !found {
		t.Error("no agent container in run-metadata.json")
	}
	if !strings.Contains(r.Stderr.String(), "timeout") {
		t.Errorf("stderr does not mention the timeout:\n%s", r.Stderr.String())
	}
}

// cfGatewayFails: a gateway that exits at start (an unknown flag) fails
// the run with the backend's exit code, an error naming the gateway, a
// failed phase in the record, no workload run, and nothing left.
func cfGatewayFails(t *testing.T, b backendUnderTest) {
	r := cfCommand(t, b, "doctor", "--x-gateway-cmd", "gateway,--no-such-flag", "--ready-timeout", "60s")
	want := b.gatewayFails
	code := r.run(t)
	if code != want.code {
		t.Errorf("exit code %d, want %d", code, want.code)
	}
	errLine := cfErrorLine(r.Stderr.String())
	for _, s := range append([]string{"gateway"}, want.says...) {
		if !strings.Contains(errLine, s) {
			t.Errorf("the error %q does not say %q; stderr:\n%s", errLine, s, r.Stderr.String())
		}
	}
	if shown := strings.Contains(r.Stderr.String(), "unknown flag: --no-such-flag"); shown != want.showsOutput {
		t.Errorf("the gateway's own complaint (\"unknown flag: --no-such-flag\") on stderr: %v, want %v:\n%s", shown, want.showsOutput, r.Stderr.String())
	}
	r.nothingLeft(t, b)
	_, m := r.runDir(t)
	if m.ExitCode != want.code || m.Verdict.OK {
		t.Errorf("run-metadata.json: exit_code %d verdict ok %v, want %d and not ok", m.ExitCode, m.Verdict.OK, want.code)
	}
	failed := slices.IndexFunc(m.Phases, func(p runs.Phase) bool { return !p.OK })
	if failed < 0 {
		t.Errorf("no failed phase in %+v", m.Phases)
	} else {
		t.Logf("failed phase %s: %s", m.Phases[failed].Name, m.Phases[failed].Error)
	}
	for _, c := range m.Containers {
		if c.Role == "agent" && c.ExitCode != nil {
			t.Errorf("the workload ran after the gateway failed (exit code %d)", *c.ExitCode)
		}
	}
}

// cfErrorLine is the CLI's error line: internal/cli prints the error a
// command returns as "mcpsidecar: ERROR" after the line naming the run
// directory (a role's own output may follow it, and may hold such lines
// too).
func cfErrorLine(stderr string) string {
	_, after, ok := strings.Cut(stderr, "run results saved to: ")
	if !ok {
		after = stderr
	}
	for _, line := range strings.Split(after, "\n") {
		if strings.HasPrefix(line, "mcpsidecar: ") {
			return line
		}
	}
	return ""
}

// cfKeep: a --keep run leaves its objects; the removal command it prints
// removes exactly them: a second kept run's stay.
func cfKeep(t *testing.T, b backendUnderTest) {
	var kept [2]*cfRun
	for i := range kept {
		kept[i] = cfCommand(t, b, "doctor", "--keep")
		if code := kept[i].run(t); code != exitcode.OK {
			t.Fatalf("doctor --keep exited %d; stderr:\n%s", code, kept[i].Stderr.String())
		}
	}
	witness := b.leftovers(t, kept[1].id)
	if left := b.leftovers(t, kept[0].id); len(left) != b.objects || len(witness) != b.objects {
		t.Fatalf("--keep kept %v and %v, want %d objects each", left, witness, b.objects)
	}
	_, after, ok := strings.Cut(kept[0].Stderr.String(), "remove it with:\n")
	if !ok {
		t.Fatalf("no removal command printed:\n%s", kept[0].Stderr.String())
	}
	removal := strings.TrimSpace(strings.SplitN(after, "\n", 2)[0])
	if out, err := exec.Command("sh", "-c", removal).CombinedOutput(); err != nil {
		t.Fatalf("the printed command %q failed: %v\n%s", removal, err, out)
	}
	kept[0].nothingLeft(t, b)
	if left := b.leftovers(t, kept[1].id); !slices.Equal(left, witness) {
		t.Errorf("the other kept run's objects changed: %v, then %v", witness, left)
	}
}

// cfGCAfterKill: gc removes what a run killed with SIGKILL left, and
// nothing of a run still alive.
func cfGCAfterKill(t *testing.T, b backendUnderTest) {
	// The live run first: a run's start removes dead runs' objects, so
	// it must not start after the kill.
	// Both in one runs directory, so gc sees the live run's output
	// mounts too.
	live := cfSleeper(t, b, "")
	dead := cfSleeper(t, b, live.runsDir)
	if err := dead.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = dead.Cmd.Wait()
	liveObjects := b.leftovers(t, live.id)
	if left := b.leftovers(t, dead.id); len(left) != b.objects || len(liveObjects) != b.objects {
		t.Fatalf("after SIGKILL: the dead run left %v, the live one has %v; want %d objects each (the test would prove nothing)",
			left, liveObjects, b.objects)
	}
	// On this host too: the output mounts of each run's directory.
	deadDir, liveDir := dead.dir(t), live.dir(t)
	deadMounts, liveMounts := cfMounts(t, deadDir), cfMounts(t, liveDir)
	t.Logf("before gc: the dead run's mounts %v, the live run's %v", deadMounts, liveMounts)
	if out := cfGC(t, b, dead); !strings.Contains(out, "(run "+filepath.Base(deadDir)) {
		t.Errorf("gc's output names nothing of the dead run %s:\n%s", filepath.Base(deadDir), out)
	}
	dead.nothingLeft(t, b)
	if left := b.leftovers(t, live.id); !slices.Equal(left, liveObjects) {
		t.Errorf("gc changed the live run's objects: %v, then %v", liveObjects, left)
	}
	if left := cfMounts(t, deadDir); len(left) > 0 {
		t.Errorf("gc left the dead run's mounts %v", left)
	}
	if got := cfMounts(t, liveDir); !slices.Equal(got, liveMounts) {
		t.Errorf("gc changed the live run's mounts: %v, then %v", liveMounts, got)
	}
	if err := live.Cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := hxWait(t, live.CLI, b.endWait); code != exitcode.Interrupted {
		t.Errorf("the live run exited %d after SIGINT, want %d", code, exitcode.Interrupted)
	}
	live.nothingLeft(t, b)
}

// cfGC runs gc for the runs directory of r and returns what it printed.
// Another run's start on this machine also removes dead runs' objects; a
// removal already under way is waited for by gc itself
// (dockerx.RemoveContainer), so any failure fails the test.
func cfGC(t *testing.T, b backendUnderTest, r *cfRun) string {
	t.Helper()
	gc := NewCLI(t, r.id, nil, append(append([]string{"gc"}, b.gcFlags...), "--runs-dir", r.runsDir)...)
	code := exitCode(t, gc.Cmd.Run())
	t.Logf("gc exited %d:\n%s%s", code, gc.Stdout.String(), gc.Stderr.String())
	if code != 0 {
		t.Fatalf("gc exited %d: %s", code, gc.Stderr.String())
	}
	return gc.Stdout.String()
}

// cfMounts lists the mount points below dir (from this process's
// mountinfo), sorted.
func cfMounts(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	slices.Sort(out)
	return out
}
