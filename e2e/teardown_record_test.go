//go:build docker

package e2e

// The record is complete even when the run ends under a call in flight
// (second red team, finding 2; e2e/redteam2/unrecorded-call). A fixture MCP
// server on this host, bound to the Docker bridge address alone, answers
// the tool call {"text": "slow"} after 30 s; the workload (python, in the
// Debian image) starts that call, gives up after 2 s and exits 0. The
// harness then stops the sidecar and the gateway: the call's start line
// and an interrupted end line must be in the audit, the gateway must have
// a decision line for the request that carried it, both roles must have
// exited by themselves (not killed after the stop grace), and the
// timeline and `runs show` must show the call. Nothing leaves the
// machine: the only destination is this host's own bridge address.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// trAttack is the workload: one slow tool call, abandoned after 2 s.
const trAttack = `import http.client, json, socket
sess = {}
def mcp(msg, timeout=20):
    c = http.client.HTTPConnection("mcp-sidecar", 8000, timeout=timeout)
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
         "MCP-Protocol-Version": "2025-06-18"}
    if "sid" in sess:
        h["Mcp-Session-Id"] = sess["sid"]
    c.request("POST", "/mcp", body=json.dumps(msg), headers=h)
    r = c.getresponse()
    body = r.read().decode(errors="replace")
    if r.getheader("Mcp-Session-Id"):
        sess["sid"] = r.getheader("Mcp-Session-Id")
    return body
mcp({"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "tr", "version": "1"}}})
mcp({"jsonrpc": "2.0", "method": "notifications/initialized"})
try:
    mcp({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "echo", "arguments": {"text": "slow"}}}, timeout=2)
except (socket.timeout, TimeoutError) as e:
    print("TR gave up on the slow call:", e, flush=True)
print("TR exiting 0", flush=True)
`

// trFixture is a minimal MCP streamable-HTTP server (JSON responses) with
// one tool, echo; {"text": "slow"} is answered after 30 s (or when the
// request is abandoned). slow counts the slow calls received.
func trFixture(slow *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string            `json:"protocolVersion"`
				Arguments       map[string]string `json:"arguments"`
			} `json:"params"`
		}
		if r.Method != http.MethodPost || json.Unmarshal(body, &msg) != nil {
			http.Error(w, "want a JSON-RPC POST", http.StatusMethodNotAllowed)
			return
		}
		if msg.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var res any = map[string]any{}
		switch msg.Method {
		case "initialize":
			v := msg.Params.ProtocolVersion
			if v == "" {
				v = "2025-06-18"
			}
			res = map[string]any{"protocolVersion": v, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "trfix", "version": "1"}}
		case "tools/list":
			res = map[string]any{"tools": []any{map[string]any{"name": "echo", "description": "Echo text.",
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}}}}
		case "tools/call":
			text := msg.Params.Arguments["text"]
			if text == "slow" {
				slow.Add(1)
				select {
				case <-time.After(30 * time.Second):
				case <-r.Context().Done():
					return
				}
			}
			res = map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": res})
	})
}

func TestTeardownRecord(t *testing.T) {
	NeedDocker(t)
	bridge := ptBridgeAddr(t)
	var slow atomic.Int32
	port := ptServe(t, bridge, trFixture(&slow))
	dir := t.TempDir()
	ctx := filepath.Join(dir, "image")
	if err := os.MkdirAll(ctx, 0o755); err != nil {
		t.Fatal(err)
	}
	agWrite(t, filepath.Join(ctx, "attack.py"), trAttack)
	agWrite(t, filepath.Join(ctx, "Dockerfile"), "FROM "+debianImage(t)+"\nCOPY attack.py /app/attack.py\n")
	image := "mcpsidecar-e2e-teardown:" + RandHex(6)
	t.Cleanup(func() { dockerErr("rmi", "-f", image) })
	docker(t, "build", "-q", "--label", TestLabel, "-t", image, ctx)
	upstream := fmt.Sprintf("%s:%d", bridge, port)
	specFile := filepath.Join(dir, "spec.toml")
	agWrite(t, specFile, `schema_version = 1
capabilities = ["network", "mcp_client"]
allowed_ip_addresses = ["`+upstream+`"]

[[mcp_servers]]
name = "fx"
url = "http://`+upstream+`/mcp"
`)
	id := RandHex(4)
	label := "mcpsidecar.e2e=" + id
	CleanupLabelled(t, label)
	runsDir := filepath.Join(dir, "runs")
	began := time.Now()
	c, code := RunCLI(t, id, nil, "run", "--allow-old-engine", "--quiet", "--spec", specFile, "--runs-dir", runsDir,
		"--image", image, "--pull", "never", "--", "python3", "/app/attack.py")
	took := time.Since(began)
	if !strings.Contains(c.Stdout.String(), "TR gave up on the slow call") {
		t.Fatalf("the workload did not give up on the slow call (exit %d)\nstdout:\n%s\nstderr:\n%s", code, c.Stdout.String(), c.Stderr.String())
	}
	if code != 0 {
		t.Errorf("exit %d, want 0 (verdict ok)\nstderr:\n%s", code, c.Stderr.String())
	}
	if n := slow.Load(); n != 1 {
		t.Fatalf("the fixture received %d slow calls, want 1", n)
	}
	t.Logf("run took %s", took.Round(time.Millisecond))
	runs, _ := filepath.Glob(filepath.Join(runsDir, "run-*"))
	if len(runs) != 1 {
		t.Fatalf("run directories %v, want one", runs)
	}
	runDir := runs[0]
	cid := trCheckAudit(t, runDir)
	trCheckDecisions(t, runDir, cid)
	trCheckMetadata(t, runDir)
	trCheckTimeline(t, runDir, cid)
	show, err := exec.Command(Binary(t), "runs", "show", runDir).CombinedOutput()
	if err != nil {
		t.Fatalf("runs show: %v\n%s", err, show)
	}
	if !strings.Contains(string(show), "echo") || !strings.Contains(string(show), "interrupted") {
		t.Errorf("runs show does not show the interrupted echo call:\n%s", show)
	}
	RequireNothingLeft(t, label)
}

// trLines decodes the JSON lines of a run file into maps.
func trLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for i, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%s line %d: %v", filepath.Base(path), i+1, err)
		}
		out = append(out, m)
	}
	return out
}

// trCheckAudit: the call's start line, then its interrupted end line;
// returns the call's correlation id.
func trCheckAudit(t *testing.T, runDir string) string {
	t.Helper()
	var start, end map[string]any
	for _, l := range trLines(t, filepath.Join(runDir, "mcp-sidecar-tool-calls.jsonl")) {
		switch {
		case l["kind"] == "call_start" && l["name"] == "echo":
			start = l
		case l["kind"] == "tools/call" && l["name"] == "echo":
			end = l
		}
	}
	if start == nil || end == nil {
		t.Fatalf("audit: start line %v, end line %v; want both for the echo call", start, end)
	}
	cid, _ := start["correlation_id"].(string)
	if args, _ := json.Marshal(start["arguments"]); string(args) != `{"text":"slow"}` || start["server"] != "fx" || cid == "" {
		t.Errorf("start line %v: want the arguments, the server fx and a correlation id", start)
	}
	errText, _ := end["error"].(string)
	if end["correlation_id"] != cid || end["ok"] != false || end["interrupted"] != true || !strings.HasPrefix(errText, "interrupted") {
		t.Errorf("end line %v: want correlation id %s, ok false, interrupted true, an error that says interrupted", end, cid)
	}
	return cid
}

// trCheckDecisions: the gateway recorded the request that carried the
// call (same correlation id, scoped to the call).
func trCheckDecisions(t *testing.T, runDir, cid string) {
	t.Helper()
	var got []map[string]any
	for _, l := range trLines(t, filepath.Join(runDir, "egress-decisions.jsonl")) {
		if l["correlation_id"] == cid {
			got = append(got, l)
		}
	}
	if len(got) == 0 {
		t.Fatalf("the gateway has no decision line for the call's request (correlation id %s)", cid)
	}
	for _, l := range got {
		if l["decision"] != "allow" || l["scope"] != "sidecar/fx/echo" || l["method"] != "POST" {
			t.Errorf("decision line %v: want an allowed POST scoped sidecar/fx/echo", l)
		}
	}
}

// trCheckMetadata: the services exited by themselves, and the verdict's
// teardown checks passed.
func trCheckMetadata(t *testing.T, runDir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "run-metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Containers []struct {
			Role     string `json:"role"`
			ExitCode *int   `json:"exit_code"`
		} `json:"containers"`
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
	for _, c := range m.Containers {
		if c.ExitCode == nil || *c.ExitCode != 0 {
			t.Errorf("container %s exit code %v, want 0 (not killed at teardown)", c.Role, c.ExitCode)
		}
	}
	checks := map[string]string{}
	for _, c := range m.Verdict.Checks {
		if !c.OK {
			t.Errorf("verdict check %q failed: %s", c.Name, c.Detail)
		}
		checks[c.Name] = c.Detail
	}
	for _, name := range []string{"roles stopped before the kill", "gateway: every sidecar tool request audited", "sidecar audit complete"} {
		if _, ok := checks[name]; !ok {
			t.Errorf("verdict has no %q check: %v", name, checks)
		}
	}
	if !strings.Contains(checks["sidecar audit complete"], "interrupted 1") {
		t.Errorf("audit check %q does not count the interrupted call", checks["sidecar audit complete"])
	}
}

// trCheckTimeline: the call is a failed tool call event saying interrupted.
func trCheckTimeline(t *testing.T, runDir, cid string) {
	t.Helper()
	for _, e := range trLines(t, filepath.Join(runDir, "timeline.jsonl")) {
		if e["kind"] == "tool_call" && e["correlation_id"] == cid {
			if e["ok"] != false || !strings.Contains(fmt.Sprint(e["summary"]), "interrupted") {
				t.Errorf("timeline event %v: want a failed call that says interrupted", e)
			}
			return
		}
	}
	t.Errorf("timeline.jsonl has no tool_call event for the call (correlation id %s)", cid)
}
