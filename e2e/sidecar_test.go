//go:build docker

package e2e

// The MCP sidecar in a real container, hardened as the harness runs it
// (FROM scratch, read-only root, all capabilities dropped, no new
// privileges, unprivileged user, noexec /tmp, only its output directory
// writable): it serves MCP, records every call, and on `docker stop`
// (SIGTERM) exits 0 with a complete audit log. The port is published on
// 127.0.0.1 only; the upstream is a closed loopback port, nothing leaves.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar"
)

const scLabel = "mcpsidecar.test=1"

func TestSidecarContainer(t *testing.T) {
	NeedDocker(t)
	id := RandHex(6)
	dir := t.TempDir()
	image := scImage(t, id)
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o777); err != nil { // the container's user is 65534
		t.Fatal(err)
	}
	name := "mcpsidecar-e2e-sidecar-" + id
	t.Cleanup(func() { _, _ = dockerErr("rm", "-f", name) })
	docker(t, "run", "-d", "--name", name, "--label", scLabel,
		"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", "65534:65534",
		"--tmpfs", "/tmp:rw,noexec,nosuid,nodev,size=16m", "--pids-limit", "128", "--memory", "128m",
		"-v", out+":/sandbox-output", "-p", "127.0.0.1::8000",
		image, "sidecar", "--audit-log", "/sandbox-output/"+sidecar.AuditFileName,
		"--upstream-url", "http://127.0.0.1:1/mcp", "--upstream-timeout", "2s")
	base := "http://" + docker(t, "port", name, "8000/tcp")
	scWaitHealthy(t, base, name)

	const calls = 20
	const trace = "abcdefabcdefabcdefabcdefabcdef01"
	cs := scConnect(t, base, "00-"+trace+"-0123456789abcdef-01")
	ctx := context.Background()
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: sidecar.AnswerFormatURI}); err != nil {
		t.Fatalf("ReadResource: %v", err)
	}
	for range calls {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: sidecar.ToolHTMLElementName})
		if err != nil || res.IsError {
			t.Fatalf("CallTool = %+v, %v", res, err)
		}
	}
	// The upstream is closed: a tool error, and the sidecar keeps serving.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "microsoft_docs_search", Arguments: map[string]any{"query": "x"}})
	if err != nil || !res.IsError {
		t.Fatalf("upstream call = %+v, %v; want a tool error", res, err)
	}
	_ = cs.Close()

	docker(t, "stop", "-t", "20", name) // SIGTERM, graceful shutdown
	if code := docker(t, "inspect", "-f", "{{.State.ExitCode}}", name); code != "0" {
		logs, _ := dockerErr("logs", name)
		t.Fatalf("exit code %s after SIGTERM, want 0; logs:\n%s", code, logs)
	}
	// The role tunes its collector at start (issue 19): the log says so.
	logs, _ := exec.Command("docker", "logs", name).CombinedOutput() // the role logs to stderr
	if !strings.Contains(string(logs), `"gc_percent":`+strconv.Itoa(sidecar.GCPercent)) {
		t.Errorf("the sidecar's start-up log lacks gc_percent %d:\n%s", sidecar.GCPercent, logs)
	}
	recs := scReadAudit(t, filepath.Join(out, sidecar.AuditFileName))
	if len(recs) != calls+2 {
		t.Fatalf("audit has %d records, want %d", len(recs), calls+2)
	}
	for i, r := range recs {
		wantOK := i <= calls
		if r.CorrelationID != trace || r.OK != wantOK {
			t.Errorf("record %d = %+v, want ok=%v with correlation id %s", i, r, wantOK, trace)
		}
	}
}

// scImage puts the binary under test into a FROM-scratch image, removed at cleanup.
func scImage(t *testing.T, id string) string {
	t.Helper()
	return scratchImage(t, "mcpsidecar-e2e-sidecar:"+id,
		"FROM scratch\nCOPY mcpsidecar /mcpsidecar\nUSER 65534:65534\nENTRYPOINT [\"/mcpsidecar\"]\n",
		map[string]string{"mcpsidecar": Binary(t)}, nil, scLabel)
}

func scWaitHealthy(t *testing.T, base, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + sidecar.HealthPath)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			logs, _ := dockerErr("logs", name)
			t.Fatalf("sidecar container never became ready: %v; logs:\n%s", err, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func scConnect(t *testing.T, base, traceparent string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: scHeaderRT{traceparent}}
	tr := &mcp.StreamableClientTransport{Endpoint: base + sidecar.MCPPath, HTTPClient: hc, DisableStandaloneSSE: true}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatalf("connecting to the sidecar container: %v", err)
	}
	return cs
}

type scHeaderRT struct{ traceparent string }

func (h scHeaderRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Traceparent", h.traceparent)
	return http.DefaultTransport.RoundTrip(r)
}

func scReadAudit(t *testing.T, path string) []sidecar.Record {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The call_start lines are checked here (one before each tools/call
	// line) and left out of what is returned: the end lines.
	var out []sidecar.Record
	open := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		var r sidecar.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit line %d is not JSON: %v: %s", n, err, sc.Bytes())
		}
		switch r.Kind {
		case sidecar.KindCallStart:
			open++
			continue
		case sidecar.KindToolCall:
			if open == 0 {
				t.Errorf("audit line %d: a tools/call with no call_start before it", n)
			}
			open--
		}
		out = append(out, r)
	}
	if open != 0 {
		t.Errorf("audit: %d call_start lines with no end line", open)
	}
	return out
}
