//go:build docker

package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGatewayLogFull: redteam-kube finding 1 on the real engine. The
// gateway's decision log is given a 1-byte budget (the test binary's
// hidden --x-log-budget), so the run's first request fills it: the log
// holds only its log_full line, every later request of doctor's check
// workload is refused (503), and the verdict fails with the named check.
func TestGatewayLogFull(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	BinaryWithTestCommands(t)
	c, code := RunCLI(t, id, nil, "doctor", "--allow-old-engine", "--runs-dir", runsDir,
		"--x-gateway-cmd", "gateway,--listen,:3128,--decision-log,/sandbox-output/egress-decisions.jsonl,--credential-listen,:3129,--x-log-budget,1")
	if code == 0 {
		t.Errorf("doctor exited 0 with a full decision log:\n%s", c.Stderr.String())
	}
	RequireNothingLeft(t, label)
	runDir := hxOnlyRun(t, runsDir)

	f, err := os.Open(filepath.Join(runDir, "egress-decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("decision line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if len(lines) != 1 || lines[0]["log_full"] != true || !strings.HasPrefix(lines[0]["reason"].(string), "decision log full: the gateway refuses all traffic") {
		t.Fatalf("decision log %v: want its log_full line only", lines)
	}

	b, err := os.ReadFile(filepath.Join(runDir, "run-metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Verdict struct {
			OK     bool `json:"ok"`
			Checks []struct {
				Name   string `json:"name"`
				OK     bool   `json:"ok"`
				Detail string `json:"detail"`
			} `json:"checks"`
		} `json:"verdict"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	found, later := false, false
	for _, ch := range m.Verdict.Checks {
		if !ch.OK {
			t.Logf("failed check %q: %s", ch.Name, ch.Detail)
		}
		// The check workload's requests after the first one, on the
		// credential listener, were answered by the refuse-all state.
		later = later || strings.Contains(ch.Detail, "503") && strings.Contains(ch.Detail, "decision log full: the gateway refuses all traffic")
		if ch.Name == "records: decision and audit logs not full" {
			found = true
			if ch.OK || !strings.Contains(ch.Detail, "egress-decisions.jsonl ended full") {
				t.Errorf("check %+v: want failed, naming the full decision log", ch)
			}
		}
	}
	if !later {
		t.Error("no check shows a later request answered 503 for the full log")
	}
	if !found || m.Verdict.OK {
		t.Errorf("verdict %+v: want failed with the log-full check", m.Verdict)
	}
}
