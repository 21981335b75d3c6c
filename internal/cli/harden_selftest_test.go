//go:build testcommands

package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/harden"
)

func TestSelftestChecks(t *testing.T) {
	none := func(string) string { return "" }
	got, err := selftestChecks("", none)
	if err != nil || len(got) != 5 {
		t.Fatalf("default checks: got %d, %v; want 5", len(got), err)
	}
	got, err = selftestChecks(`[{"name":"r","action":"read","arg":"/etc/passwd","want":"ok"}]`, none)
	if err != nil || len(got) != 1 || got[0].Arg != "/etc/passwd" {
		t.Fatalf("flag checks: got %+v, %v", got, err)
	}
	if _, err := selftestChecks(`[{`, none); err == nil {
		t.Fatal("malformed --checks accepted")
	} else if code, _ := codeOf(err); code != ExitUsage {
		t.Errorf("got exit code %d, want %d", code, ExitUsage)
	}
}

func TestSelftestVerdict(t *testing.T) {
	if err := selftestVerdict([]harden.CheckResult{{Pass: true}}); err != nil {
		t.Errorf("all passed: got %v", err)
	}
	err := selftestVerdict([]harden.CheckResult{{Check: harden.Check{Name: "ptrace", Want: "denied"}, Got: "ok"}})
	var ee *exitcode.Error
	if !errors.As(err, &ee) || ee.Code != ExitViolation || !strings.Contains(err.Error(), "ptrace (got ok, want denied)") {
		t.Errorf("got %v, want exit %d naming ptrace", err, ExitViolation)
	}
}
