//go:build kube && docker

package e2e

// The agent's own telemetry on the Kubernetes backend (issue 33): the
// same workload as TestAgentTelemetryRelay's "live" run (x-otlp, one span
// a request, 50 of them, one every 100 ms) on the test cluster, with
// agent_telemetry = true. Its spans reach the loopback receiver each
// once, under the run's trace, and some of them while the run goes: the
// gateway pod's spool is copied into the run directory as it grows
// (internal/livecopy, through the pod's holder), where the host's live
// relay reads it. The record holds no trace of a secret the workload put
// into its telemetry, in the collected file or the gateway's folder.
//
//	KUBECONFIG=/var/lib/mcpsidecar-kube/kubeconfig MCPSIDECAR_BIN=$PWD/bin/mcpsidecar-test \
//	  go test -count=1 -tags docker,kube -run TestKubeAgentTelemetryRelay ./e2e/

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKubeAgentTelemetryRelay(t *testing.T) {
	c := kbClient(t)
	NeedDocker(t)
	rcv := &spanReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	id := RandHex(6)
	dir := t.TempDir()
	t.Cleanup(func() { agRemoveRunImages(dir) })
	specFile := filepath.Join(dir, "spec.toml")
	spec := relaySpec + "\n[[environment_variables]]\nname = \"RELAY_TOKEN\"\nfrom_host = true\n"
	if err := os.WriteFile(specFile, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	runsDir := filepath.Join(dir, "runs")
	// The secret is the host's, forwarded to the workload (a secret-named
	// variable), which writes it into a span's attributes.
	const secret = "kube-relay-secret-0123456789abcdef"
	cmd, out, errb := kbCommand(t, "run", id, runsDir)
	cmd.Args = append(cmd.Args, "--spec", specFile, "--timeout", "3m", "--otlp-endpoint", srv.URL,
		"--x-workload-cmd", fmt.Sprintf("x-otlp,--spans,%d,--every,%s,--attribute-env,RELAY_TOKEN", relayLive, relayEvery))
	cmd.Env = append(cmd.Env, "RELAY_TOKEN="+secret)
	err := cmd.Run()
	t.Logf("stderr:\n%s", errb)
	runDir, meta := kbRunDir(t, runsDir)
	r := relayRun{dir: runDir, stdout: out.String(), stderr: errb.String(), err: err, decisions: relayDecisions(t, runDir)}
	liveRelay(t, r, rcv) // otel_relay_test.go: each span once, some during the run
	// x-otlp is not the agent: the run's verdict (which wants an answer)
	// is not this test's; the record's redaction and the relay are.
	t.Logf("the run's exit: %v (exit code %d)", err, meta.ExitCode)
	agCheckNoSecret(t, runDir, secret) // the gateway's folder included
	if rcv.got(secret) {
		t.Error("the collector got the secret")
	}
	// The workload did put it into its spans: the gateway's spool holds
	// the redaction where the value was.
	if raw, err := os.ReadFile(filepath.Join(runDir, "gateway", "agent-telemetry.jsonl")); err != nil || !strings.Contains(string(raw), "<redacted>") {
		t.Errorf("gateway/agent-telemetry.jsonl (%v) has no redacted value: the workload's attribute never carried the secret", err)
	}
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Error("the secret is in the run's output")
	}
	kbNoNamespace(t, c, id)
}
