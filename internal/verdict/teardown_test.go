package verdict

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

func intp(v int) *int { return &v }

func TestRolesStopped(t *testing.T) {
	tests := []struct {
		name   string
		codes  map[string]*int
		ok     bool
		detail string
	}{
		{"clean exits", map[string]*int{"gateway": intp(0), "sidecar": intp(0)}, true, "2 roles exited by themselves"},
		{"no exit code", map[string]*int{"gateway": nil, "sidecar": intp(0)}, false, "gateway (no exit code)"},
		{"killed", map[string]*int{"gateway": intp(0), "sidecar": intp(137)}, false, "sidecar (exit code 137, SIGKILL)"},
		{"an error exit is not a kill", map[string]*int{"gateway": intp(1)}, true, "1 roles"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := RolesStopped(tt.codes)
			if c.OK != tt.ok || !strings.Contains(c.Detail, tt.detail) {
				t.Errorf("RolesStopped = %+v, want ok %v and a detail with %q", c, tt.ok, tt.detail)
			}
		})
	}
}

func TestSidecarEgress(t *testing.T) {
	const (
		start  = `{"time":"t","kind":"call_start","name":"fx_echo","correlation_id":"c1"}` + "\n"
		end    = `{"time":"t","kind":"tools/call","name":"fx_echo","ok":false,"interrupted":true,"correlation_id":"c1"}` + "\n"
		onCall = `{"decision":"allow","scope":"sidecar/fx/echo","correlation_id":"c1"}` + "\n"
		onConn = `{"decision":"allow","scope":"sidecar/fx","correlation_id":"k1"}` + "\n"
		agent  = `{"decision":"deny","scope":"agent","correlation_id":"a1"}` + "\n"
		noScop = `{"decision":"allow","correlation_id":"z1"}` + "\n"
		orphan = `{"decision":"allow","scope":"sidecar/fx/echo","correlation_id":"c2"}` + "\n"
	)
	tests := []struct {
		name             string
		audit, decisions *string
		ok               bool
		detail           string
	}{
		{"every call audited", ptr(start + end), ptr(onConn + onCall + agent + noScop), true, "1 requests for sidecar tool calls"},
		{"started only", ptr(start), ptr(onCall), true, "1 audited calls"},
		{"a request with no call", ptr(start + end), ptr(onCall + orphan), false, "correlation ids c2"},
		{"no audit", nil, ptr(onCall), false, "missing"},
		{"no decision log", ptr(start + end), nil, false, "missing"},
		{"torn decision line", ptr(start + end), ptr(onCall + `{"scope":"sid`), false, "line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range map[string]*string{runs.FileAudit: tt.audit, runs.FileDecisions: tt.decisions} {
				if body != nil {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(*body), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			c := SidecarEgress(dir)
			if c.OK != tt.ok || !strings.Contains(c.Detail, tt.detail) {
				t.Errorf("SidecarEgress = %+v, want ok %v and a detail with %q", c, tt.ok, tt.detail)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestReadCallsUnended(t *testing.T) {
	dir := t.TempDir()
	audit := `{"kind":"call_start","name":"a","correlation_id":"c1"}
{"kind":"tools/call","name":"a","ok":true,"correlation_id":"c1"}
{"kind":"call_start","name":"b","correlation_id":"c2"}
`
	path := filepath.Join(dir, runs.FileAudit)
	if err := os.WriteFile(path, []byte(audit), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ReadCalls(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Unended) != 1 || c.Unended[0] != "c2" || !strings.Contains(c.UnendedDetail(), "1 tool calls started and have no end line") {
		t.Errorf("ReadCalls = %+v (%q), want c2 unended", c, c.UnendedDetail())
	}
}
