//go:build linux

package egress

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDecisionFieldNames keeps the struct tags and the exported field-name
// constants (the documented contract) in step.
func TestDecisionFieldNames(t *testing.T) {
	b, err := json.Marshal(Decision{Error: "x", Credential: CredentialInjected, Scope: "agent", LogFull: true, Path: "/", HeldValue: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	want := []string{FieldTime, FieldRunID, FieldClient, FieldMethod, FieldHost, FieldPort, FieldResolvedIP, FieldDecision,
		FieldRule, FieldReason, FieldBytesUp, FieldBytesDown, FieldDurationMS, FieldCorrelationID, FieldError, FieldCredential, FieldScope, FieldLogFull, FieldPath, FieldHeldValue}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decision JSON keys (-want +got):\n%s", diff)
	}
}

func TestDecisionLogFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "egress-decisions.jsonl")
	l, err := OpenDecisionLog(path)
	if err != nil {
		t.Fatal(err)
	}
	d := Decision{Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Method: "CONNECT", Host: "a.test", Decision: Deny, Reason: "r"}
	for range 2 {
		if err := l.Record(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], `{"time":"2026-01-02T03:04:05.000000006Z"`) {
		t.Errorf("log content %q", b)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
}

// TestDecisionLogRefusesSymlink: the log sits in a directory the workload
// can write; a planted link must not redirect the gateway's writes.
func TestDecisionLogRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep"), 0o600)
	link := filepath.Join(dir, "egress-decisions.jsonl")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if l, err := OpenDecisionLog(link); err == nil {
		l.Close()
		t.Fatal("OpenDecisionLog followed a symbolic link")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("victim changed: %q", b)
	}
}

func TestTraceID(t *testing.T) {
	cases := []struct {
		name string
		in   []string
		want string
	}{
		{"valid", []string{testTraceparent}, testTraceID},
		{"upper case", []string{strings.ToUpper(testTraceparent)}, ""}, // invalid under the W3C rule (internal/trace)
		{"first wins", []string{testTraceparent, "00-11111111111111111111111111111111-b7ad6b7169203331-01"}, testTraceID},
		{"none", nil, ""},
		{"empty", []string{""}, ""},
		{"all zero", []string{"00-00000000000000000000000000000000-b7ad6b7169203331-01"}, ""},
		{"short id", []string{"00-0af7651916cd43dd8448eb211c8031-b7ad6b7169203331-01"}, ""},
		{"not hex", []string{"00-0af7651916cd43dd8448eb211c80319z-b7ad6b7169203331-01"}, ""},
		{"version ff", []string{"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, ""},
		{"bad parent", []string{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b71-01"}, ""},
		{"missing flags", []string{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331"}, ""},
		{"injection", []string{"00-0af7651916cd43dd8448eb211c80319c\n-b7ad6b7169203331-01"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := traceID(tc.in); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNewRequiresPolicyAndLog(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("New without policy and log succeeded")
	}
}
