package verdict

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHeldStayedEncodedForms: a held value in the record as itself, or
// as the record's encoders write it (JSON-escaped, base64), fails the
// check, naming the variable and the file; the record without it passes
// and says what it searched.
func TestHeldStayedEncodedForms(t *testing.T) {
	const value = `tok"en-0123456789\abc`
	held := []HeldValue{{Variable: "GITHUB_TOKEN", Value: value}}
	for name, content := range map[string]string{
		"raw":          "the value " + value,
		"json-escaped": `{"k":"tok\"en-0123456789\\abc"}`,
		"base64":       `{"bytesValue":"` + base64.StdEncoding.EncodeToString([]byte("prefix "+value)) + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "gateway"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "gateway", "agent-telemetry.jsonl"), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			c := HeldStayed(dir, held, nil, nil)
			want := "GITHUB_TOKEN in " + filepath.Join("gateway", "agent-telemetry.jsonl")
			if c.OK || !strings.Contains(c.Detail, want) || strings.Count(c.Detail, want) != 1 {
				t.Errorf("check: ok %v, %q; want it failed, naming %q once", c.OK, c.Detail, want)
			}
			if strings.Contains(c.Detail, value) {
				t.Errorf("the detail holds the value: %q", c.Detail)
			}
		})
	}
	c := HeldStayed(t.TempDir(), held, []byte("clean"), nil)
	if !c.OK || !strings.Contains(c.Detail, "the value of GITHUB_TOKEN is in none of") {
		t.Errorf("a clean record: ok %v, %q", c.OK, c.Detail)
	}
}
