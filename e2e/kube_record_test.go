//go:build kube

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/verdict"
)

// kbBridgeHost is this host's own address on the test cluster's bridge
// (scripts/kube-test-cluster.sh): the pods reach a fixture bound to it,
// and nothing leaves the machine.
const kbBridgeHost = "10.237.0.1"

var (
	kbTestBinOnce sync.Once
	kbTestBinPath string
	kbTestBinErr  error
)

// kbTestBinary is this tree's test binary (-tags testcommands: the
// workload can be replaced with x-get), static.
func kbTestBinary(t *testing.T) string {
	t.Helper()
	kbTestBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpsidecar-e2e-kube-test-")
		if err != nil {
			kbTestBinErr = err
			return
		}
		kbTestBinPath = filepath.Join(dir, "mcpsidecar")
		cmd := exec.Command("go", "build", "-trimpath", "-tags", "testcommands", "-o", kbTestBinPath, "github.com/mcpsidecar/mcpsidecar/cmd/mcpsidecar")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("go build: %s", out)
			kbTestBinErr = err
		}
	})
	if kbTestBinErr != nil {
		t.Fatalf("building the test binary: %v", kbTestBinErr)
	}
	return kbTestBinPath
}

// kbHoldFixture is an HTTP server that holds every request until its
// client goes away, recording when each arrived and ended.
type kbHoldFixture struct {
	mu   sync.Mutex
	n    int
	held []kbHeld
}

type kbHeld struct{ arrived, ended time.Time }

func (f *kbHoldFixture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := kbHeld{arrived: time.Now()}
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
	select {
	case <-r.Context().Done():
	case <-time.After(2 * time.Minute):
	}
	h.ended = time.Now()
	f.mu.Lock()
	f.held = append(f.held, h)
	f.mu.Unlock()
	http.Error(w, "held", http.StatusServiceUnavailable)
}

// TestKubeStopRecord: a line a service writes while it stops is in the
// record on the Kubernetes backend. The workload (x-get) sends a request
// through the gateway to a fixture on this host's bridge address, which
// holds the answer back, and outlives the run's timeout; so the request
// is still in flight when the services are stopped. The gateway's
// shutdown (SIGTERM, sent by our stop command through the API) cancels
// it and only then writes its decision line, marked interrupted. That
// line must be in the run's egress-decisions.jsonl, read from the pod
// after the gateway stopped, and both services must have exited 0 by
// themselves after their SIGTERM (not killed). When the files were
// copied from the node before any service was stopped, this line was
// missing.
func TestKubeStopRecord(t *testing.T) {
	c := kbClient(t)
	ln, err := net.Listen("tcp", kbBridgeHost+":0")
	if err != nil {
		t.Fatalf("listening on the test bridge's host address (is the cluster up?): %v", err)
	}
	fx := &kbHoldFixture{}
	srv := &http.Server{Handler: fx, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	upstream := fmt.Sprintf("%s:%d", kbBridgeHost, port)
	dir := t.TempDir()
	specFile := filepath.Join(dir, "spec.toml")
	if err := os.WriteFile(specFile, []byte("schema_version = 1\ncapabilities = [\"network\", \"mcp_client\"]\nallowed_ip_addresses = [\""+upstream+"\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	id, runsDir := kbID(), filepath.Join(dir, "runs")
	t.Cleanup(func() { kbNoNamespace(t, c, id) })
	state := kbState()
	cmd := exec.Command(kbTestBinary(t), "doctor", "--backend", "kubernetes", "--allow-old-engine", "--runs-dir", runsDir,
		"--spec", specFile, "--x-workload-cmd", "x-get,http://"+upstream+"/held", "--timeout", "10s",
		"--kube-image-import", "containerd:"+filepath.Join(state, "containerd", "containerd.sock"),
		"--kube-node-root", filepath.Join(state, "kubelet"), "--kube-pod-addresses")
	cmd.Env = append(os.Environ(), "MCPSIDECAR_LABELS=mcpsidecar.e2e.kube="+id)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The moment the workload's timeout is reported: the wait phase's line.
	var waitEnded time.Time
	var errText strings.Builder
	waitLine := regexp.MustCompile(`\[wait\s*\]\s+[0-9.]+ ms`)
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		errText.WriteString(sc.Text() + "\n")
		if waitEnded.IsZero() && waitLine.MatchString(sc.Text()) {
			waitEnded = time.Now()
		}
	}
	_ = cmd.Wait() // the workload timed out: doctor fails
	t.Logf("doctor stdout:\n%s\nstderr:\n%s", out.String(), errText.String())
	if waitEnded.IsZero() {
		t.Fatal("the wait phase's end was never reported")
	}
	fx.mu.Lock()
	held, n := append([]kbHeld(nil), fx.held...), fx.n
	fx.mu.Unlock()
	runDir, m := kbRunDir(t, runsDir)
	if len(held) != 1 || n != 1 {
		t.Fatalf("the fixture received %d requests and held %d to their end, want 1 (the workload's)", n, len(held))
	}
	h := held[0]
	if !h.arrived.Before(waitEnded) || h.ended.Before(waitEnded) {
		t.Fatalf("the held request ran %s to %s; want it in flight when the workload's timeout was reported (%s)",
			h.arrived.Format(time.TimeOnly+".000"), h.ended.Format(time.TimeOnly+".000"), waitEnded.Format(time.TimeOnly+".000"))
	}
	line := kbDecisionFor(t, runDir, kbBridgeHost, port, h.arrived)
	if line == nil {
		b, _ := os.ReadFile(filepath.Join(runDir, "egress-decisions.jsonl"))
		t.Fatalf("egress-decisions.jsonl has no line for the request held until the stop (arrived %s):\n%s", h.arrived.Format(time.TimeOnly+".000"), b)
	}
	t.Logf("the decision written at the stop: %v", line)
	if e, _ := line["error"].(string); line["decision"] != "allow" || !strings.Contains(e, egress.ErrorInterrupted) {
		t.Errorf("decision %v: want an allowed request whose error says %s (cut off by the gateway's shutdown)", line, egress.ErrorInterrupted)
	}
	if len(m.Containers) != 3 {
		t.Errorf("metadata: %d containers, want 3 (gateway, sidecar, agent)", len(m.Containers))
	}
	for _, ct := range m.Containers {
		if ct.Role == "agent" {
			continue
		}
		if ct.ExitCode == nil || *ct.ExitCode != 0 {
			t.Errorf("%s exit code %v, want 0 (ended by itself after its SIGTERM)", ct.Role, ct.ExitCode)
		}
	}
	found := false
	for _, ck := range m.Verdict.Checks {
		if ck.Name == verdict.CheckRolesStopped {
			found = true
			if !ck.OK {
				t.Errorf("check %q failed: %s", ck.Name, ck.Detail)
			}
		}
	}
	if !found {
		t.Errorf("the verdict has no %q check", verdict.CheckRolesStopped)
	}
}

// kbDecisionFor finds the decision line of the request to host:port that
// the upstream saw arrive at arrived: the gateway received it before (a
// second of slack), and at most its dial timeout (10 s) before, since a
// lost SYN alone delays the upstream's arrival by a second (the line was
// there, 1.03 s ahead, when a one-second window failed this test).
func kbDecisionFor(t *testing.T, runDir, host string, port int, arrived time.Time) map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(runDir, "egress-decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var d map[string]any
		if json.Unmarshal(sc.Bytes(), &d) != nil {
			continue
		}
		at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(d["time"]))
		p, _ := d["port"].(float64)
		if d["host"] == host && int(p) == port && at.Before(arrived.Add(time.Second)) && arrived.Sub(at) < 10*time.Second {
			return d
		}
	}
	return nil
}
