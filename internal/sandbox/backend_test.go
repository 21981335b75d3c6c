package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/verdict"
)

// fakeBackend records the lifecycle's calls and creates nothing on an
// engine: its apply "runs" every planned container, which exits 0.
type fakeBackend struct {
	mu      sync.Mutex
	calls   []string
	failAt  string             // the call that fails
	onApply func(*job) error   // replaces apply's end of the workload
	extra   []runs.Check       // checks
	iso     []runs.Check       // isolation
	made    map[string]bool    // objects "created" by outputs and apply
	cancel  context.CancelFunc // cancelled by apply, when set
}

var errFake = errors.New("the fake backend failed")

func (b *fakeBackend) call(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, name)
	if b.failAt == name {
		return errFake
	}
	return nil
}

func (b *fakeBackend) Name() string { return "fake" }

func (b *fakeBackend) Preflight(context.Context, *Job) error { return b.call("preflight") }

func (b *fakeBackend) Input(_ *Job, in *orchestrate.Input) error {
	in.DropRoutes = false
	return b.call("input")
}

func (b *fakeBackend) Outputs(_ context.Context, _ *Job, plan *orchestrate.Plan) error {
	b.made = map[string]bool{}
	for _, st := range plan.Containers {
		b.made["output "+st.Role] = true
	}
	return b.call("outputs")
}

func (b *fakeBackend) Apply(ctx context.Context, r *Job) error {
	j := r.j
	for _, st := range j.sess.Plan.Containers {
		code := 0
		j.sess.Containers = append(j.sess.Containers, &orchestrate.Container{Step: st, ID: "fake-" + st.Role, Pid: 1, ExitCode: &code})
		b.made["container "+st.Role] = true
	}
	if b.cancel != nil {
		b.cancel()
		<-ctx.Done()
	}
	if err := b.call("apply"); err != nil {
		return err
	}
	if b.onApply != nil {
		return b.onApply(j)
	}
	code := 0
	j.agentExit = &code
	return nil
}

func (b *fakeBackend) Stop(context.Context, *Job) { _ = b.call("stop") }

// Logs answers for the backend's own containers: the lifecycle reads a
// role's streams through the seam, never from the engine.
func (b *fakeBackend) Logs(_ context.Context, _ *Job, c *orchestrate.Container, _, stderr io.Writer) error {
	_, err := fmt.Fprintf(stderr, "fake backend log of %s\n", c.ID)
	return err
}

func (b *fakeBackend) Teardown(context.Context, *Job) error {
	clear(b.made)
	return b.call("teardown")
}

func (b *fakeBackend) Checks(*Job) []runs.Check {
	_ = b.call("checks")
	return b.extra
}

func (b *fakeBackend) Isolation(*Job) []runs.Check {
	_ = b.call("isolation")
	return b.iso
}

// fakeRig is a lifecycle rig whose plan runs on fakeBackend: the engine
// only answers preflight and builds the image.
func fakeRig(t *testing.T, workload orchestrate.Workload) (*rig, *fakeBackend) {
	r := newRig(t, workload)
	b := &fakeBackend{}
	r.o.Backend = b
	return r, b
}

// TestBackendSeamOrder: the lifecycle calls a backend in its fixed order,
// adds its checks to the verdict, and creates nothing on the engine but
// the image (the plan's containers are the backend's).
func TestBackendSeamOrder(t *testing.T) {
	r, b := fakeRig(t, orchestrate.WorkloadCheck)
	b.extra = []runs.Check{{Name: "the fake backend's own check", OK: true, Detail: "looked"}}
	res, err := r.run(context.Background())
	if err != nil && !strings.HasPrefix(err.Error(), "verdict: ") {
		t.Fatalf("run: %v\n%s", err, r.errb.String())
	}
	want := []string{"preflight", "input", "outputs", "apply", "stop", "checks", "teardown"}
	if diff := cmp.Diff(want, b.calls); diff != "" {
		t.Errorf("backend calls (-want +got):\n%s", diff)
	}
	if !slices.ContainsFunc(res.Metadata.Verdict.Checks, func(c runs.Check) bool { return c.Name == "the fake backend's own check" }) {
		t.Errorf("the backend's check is not in the verdict: %+v", res.Metadata.Verdict.Checks)
	}
	for _, c := range r.f.CallList() {
		if strings.HasPrefix(c, "create ") || strings.HasPrefix(c, "create-network ") || strings.HasPrefix(c, "create-volume ") {
			t.Errorf("the lifecycle created %q on the engine; the plan is the backend's", c)
		}
	}
	wantPhases := []string{"spec", "preflight", "image", "run-dir", "collect", "teardown"}
	if diff := cmp.Diff(wantPhases, phaseNames(res.Metadata.Phases)); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	// The roles' logs came through the seam.
	if logs, err := os.ReadFile(filepath.Join(res.RunDir, "gateway-logs.json")); err != nil || !strings.Contains(string(logs), "fake backend log of fake-gateway") {
		t.Errorf("gateway-logs.json was not read through the backend: %s, %v", logs, err)
	}
	if len(b.made) != 0 {
		t.Errorf("left after teardown: %v", b.made)
	}
}

// TestBackendSeamFailure: a failure in each call of the backend fails the
// run with its error, and everything the backend may have made by then
// is torn down: teardown runs once outputs was called, and not before.
func TestBackendSeamFailure(t *testing.T) {
	for _, at := range []string{"preflight", "input", "outputs", "apply"} {
		t.Run(at, func(t *testing.T) {
			r, b := fakeRig(t, orchestrate.WorkloadCheck)
			b.failAt = at
			res, err := r.run(context.Background())
			if !errors.Is(err, errFake) {
				t.Fatalf("run: %v, want the backend's failure", err)
			}
			tornDown := slices.Contains(b.calls, "teardown")
			if want := at == "outputs" || at == "apply"; tornDown != want {
				t.Errorf("calls %v: teardown %v, want %v", b.calls, tornDown, want)
			}
			if len(b.made) != 0 {
				t.Errorf("left after the failure: %v", b.made)
			}
			if res.Metadata.Verdict.OK || res.Metadata.ExitCode == 0 {
				t.Errorf("a failed run: verdict ok %v, exit %d", res.Metadata.Verdict.OK, res.Metadata.ExitCode)
			}
		})
	}
}

// TestBackendSeamCancel: a run cancelled while the backend runs the plan
// is stopped, collected and torn down, and says it was interrupted.
func TestBackendSeamCancel(t *testing.T) {
	r, b := fakeRig(t, orchestrate.WorkloadCheck)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.cancel = cancel
	b.onApply = func(*job) error { return context.Canceled }
	res, _ := r.run(ctx)
	for _, want := range []string{"stop", "teardown"} {
		if !slices.Contains(b.calls, want) {
			t.Errorf("calls %v: no %s after the cancel", b.calls, want)
		}
	}
	if res.Metadata.ExitCode != 130 {
		t.Errorf("exit code %d, want 130 (interrupted)", res.Metadata.ExitCode)
	}
	if len(b.made) != 0 {
		t.Errorf("left after the cancel: %v", b.made)
	}
}

// TestBackendSeamIsolation: on test-sandbox, a backend's measure of the
// isolation that fails is a violation (exit 4), as a probe's is; one that
// holds is a check of the verdict.
func TestBackendSeamIsolation(t *testing.T) {
	for _, holds := range []bool{true, false} {
		r, b := fakeRig(t, orchestrate.WorkloadProbe)
		r.o.Command = "test-sandbox"
		b.iso = []runs.Check{{Name: "the fake backend's layer holds", OK: holds, Detail: "measured"}}
		b.onApply = func(j *job) error { // the probe suite's report: no violation of its own
			code := 0
			j.agentExit = &code
			return j.dir.Write(runs.FileProbeReport, []byte(`[{"id":"G01","capabilities":[{"id":"T01","verdict":"pass"}]}]`))
		}
		res, err := r.run(context.Background())
		if !slices.Contains(b.calls, "isolation") {
			t.Fatalf("holds %v: isolation not asked: %v", holds, b.calls)
		}
		if !slices.ContainsFunc(res.Metadata.Verdict.Checks, func(c runs.Check) bool { return c.Name == "the fake backend's layer holds" && c.OK == holds }) {
			t.Errorf("holds %v: the layer's check is not in the verdict", holds)
		}
		if !holds && res.Metadata.ExitCode != 4 {
			t.Errorf("a layer that does not hold: exit %d (%v), want 4", res.Metadata.ExitCode, err)
		}
	}
}

// TestRawRoleCopiesRedacted: what a role wrote into its folder of the run
// directory keeps no secret value once the run is over: its raw copy is
// replaced by the same redaction as the collected artifact (issue 33: a
// secret the workload put into its relayed telemetry stayed in
// gateway/agent-telemetry.jsonl while agent-telemetry.jsonl was clean).
// A file without a secret is left as the container wrote it.
func TestRawRoleCopiesRedacted(t *testing.T) {
	const secret = "sk-live-relay-0123456789"
	r, b := fakeRig(t, orchestrate.WorkloadCheck)
	var written []string
	b.onApply = func(j *job) error {
		j.secrets = append(j.secrets, secret)
		for _, c := range j.sess.Containers {
			role := c.Step.Role
			if err := os.MkdirAll(filepath.Join(j.dir.Path, role), 0o700); err != nil {
				return err
			}
			for _, name := range append([]string{runs.FileHardenReport}, runs.RoleFiles[role]...) {
				p := filepath.Join(j.dir.Path, role, name)
				if err := os.WriteFile(p, []byte(`{"line":"`+name+` carries `+secret+`"}`+"\n"), 0o644); err != nil {
					return err
				}
				written = append(written, filepath.Join(role, name))
			}
			clean := filepath.Join(j.dir.Path, role, "unrelated.txt")
			if err := os.WriteFile(clean, []byte("kept as written "+secret), 0o644); err != nil {
				return err
			}
		}
		code := 0
		j.agentExit = &code
		return nil
	}
	res, _ := r.run(context.Background())
	if len(written) == 0 {
		t.Fatal("the plan has no role with files to collect")
	}
	dir := res.RunDir
	for _, rel := range written {
		data, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if strings.Contains(string(data), secret) || !strings.Contains(string(data), dockerx.Redacted) {
			t.Errorf("%s after the run = %q, want the secret redacted", rel, data)
		}
	}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "unrelated.txt" {
			return err
		}
		if data, _ := os.ReadFile(p); strings.Contains(string(data), secret) {
			t.Errorf("%s holds the secret after the run", p)
		}
		if strings.HasPrefix(d.Name(), ".mcpsidecar-") {
			t.Errorf("%s: a temporary file was left", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A file the harness does not collect is the workload's own data:
	// kept as written, and named in the record as holding a secret.
	for _, c := range res.Metadata.Containers {
		data, err := os.ReadFile(filepath.Join(dir, c.Role, "unrelated.txt"))
		if err != nil || !strings.Contains(string(data), secret) {
			t.Errorf("%s/unrelated.txt = %q, %v: want it as the role wrote it", c.Role, data, err)
		}
		want := filepath.Join(c.Role, "unrelated.txt") + " holds a secret value of the run"
		if !slices.ContainsFunc(res.Metadata.ArtifactProblems, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Errorf("no artifact problem %q in %q", want, res.Metadata.ArtifactProblems)
		}
	}
	for _, p := range res.Metadata.ArtifactProblems {
		if strings.Contains(p, secret) {
			t.Errorf("an artifact problem names the value: %q", p)
		}
	}
	if n := strings.Count(strings.Join(res.Metadata.ArtifactProblems, "\n"), "holds a secret value"); n != len(res.Metadata.Containers) {
		t.Errorf("%d files named as holding a secret, want %d (the unrelated ones only): %q", n, len(res.Metadata.Containers), res.Metadata.ArtifactProblems)
	}
}

// TestHeldLeakFoundBeforeRedaction: a value the gateway held, written by
// the workload into a file of its folder, fails the verdict's check
// naming that file, although the folder is redacted afterwards (the
// check reads the folders as the containers left them), and the record
// then keeps no copy of the value.
func TestHeldLeakFoundBeforeRedaction(t *testing.T) {
	const key = "sk-held-by-the-gateway-0123456789"
	r, b := fakeRig(t, orchestrate.WorkloadCheck)
	getenv := r.o.Getenv
	r.o.Getenv = func(k string) string {
		if k == "OPENAI_API_KEY" {
			return key
		}
		return getenv(k)
	}
	b.onApply = func(j *job) error {
		if err := os.MkdirAll(filepath.Join(j.dir.Path, orchestrate.RoleAgent), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(j.dir.Path, orchestrate.RoleAgent, runs.FileAnswer), []byte("the key is "+key+"\n"), 0o644); err != nil {
			return err
		}
		code := 0
		j.agentExit = &code
		return nil
	}
	res, _ := r.run(context.Background())
	var held *runs.Check
	for i, c := range res.Metadata.Verdict.Checks {
		if c.Name == verdict.CheckHeldStayed {
			held = &res.Metadata.Verdict.Checks[i]
		}
	}
	if held == nil {
		t.Fatalf("no %q check: %+v", verdict.CheckHeldStayed, res.Metadata.Verdict.Checks)
	}
	if held.OK || !strings.Contains(held.Detail, filepath.Join(orchestrate.RoleAgent, runs.FileAnswer)) {
		t.Errorf("check %q: ok %v, %q; want it failed, naming agent/answer.txt", held.Name, held.OK, held.Detail)
	}
	if res.Metadata.Verdict.OK {
		t.Error("the verdict is ok with a held value in the record")
	}
	err := filepath.WalkDir(res.RunDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if data, _ := os.ReadFile(p); strings.Contains(string(data), key) {
			t.Errorf("%s holds the key after the run", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
