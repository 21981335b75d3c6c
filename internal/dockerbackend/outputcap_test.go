package dockerbackend

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/verdict"
)

// A role that leaves more entries than the cap in its output directory is
// stopped, warned about, and fails the verdict; one under the cap is not.
func TestOutputCapStopsARole(t *testing.T) {
	dir, err := runs.Create(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	for _, role := range []string{"agent", "sidecar"} {
		if err := os.Mkdir(filepath.Join(dir.Path, role), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for i := range runs.MaxOutputEntries + 1 {
		if err := os.WriteFile(filepath.Join(dir.Path, "agent", strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var errb bytes.Buffer
	var killed []string
	oc := &outputCap{over: map[string]string{}, usage: dir.Usage, kill: func(_ context.Context, role string) error {
		killed = append(killed, role)
		return nil
	}, warn: func(format string, args ...any) { fmt.Fprintf(&errb, "warning: "+format+"\n", args...) }}
	for _, role := range []string{"agent", "sidecar", "agent"} {
		oc.check(context.Background(), role)
	}
	if len(killed) != 1 || killed[0] != "agent" {
		t.Errorf("killed %v, want the agent once", killed)
	}
	var checks []runs.Check
	for _, c := range verdict.Judge(verdict.Record{Dir: dir.Path, Started: true, OutputOver: oc.over, Planned: []string{"gateway", "sidecar", "agent"}}).Checks {
		if strings.HasSuffix(c.Name, " output within its cap") {
			checks = append(checks, c)
		}
	}
	if len(checks) != 1 || checks[0].OK || !strings.Contains(checks[0].Detail, "passed its cap") {
		t.Errorf("checks %+v", checks)
	}
	if !strings.Contains(errb.String(), "warning: agent output directory passed its cap") {
		t.Errorf("stderr %q", errb.String())
	}
}
