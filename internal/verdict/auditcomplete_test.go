package verdict

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditComplete: whole records pass, interrupted calls are counted,
// and a call_start with no end line fails the check.
func TestAuditComplete(t *testing.T) {
	const (
		start = `{"time":"t","kind":"call_start","name":"fx_echo","correlation_id":"c1"}` + "\n"
		end   = `{"time":"t","kind":"tools/call","name":"fx_echo","ok":false,"interrupted":true,"correlation_id":"c1"}` + "\n"
		pin   = `{"time":"t","kind":"pin_check","name":"fx","correlation_id":"k1"}` + "\n"
	)
	tests := []struct {
		name, audit string
		ok          bool
		detail      string
	}{
		{"start and interrupted end", pin + start + end, true, "3 audit lines, each a whole record (call_start 1, interrupted 1, pin_check 1, tools/call 1)"},
		{"start with no end", pin + start, false, "1 tool calls started and have no end line"},
		{"incomplete record", `{"time":"t","kind":"tools/call"}` + "\n", false, "an incomplete record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			if err := os.WriteFile(path, []byte(tt.audit), 0o600); err != nil {
				t.Fatal(err)
			}
			c := auditComplete(path)
			if c.OK != tt.ok || !strings.Contains(c.Detail, tt.detail) {
				t.Errorf("auditComplete = %+v, want ok %v and a detail with %q", c, tt.ok, tt.detail)
			}
		})
	}
}
