package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
)

// refusingEngine holds leftovers and refuses to remove its containers.
type refusingEngine struct{ leftoverEngine }

func (e *refusingEngine) RemoveContainer(_ context.Context, id string) error {
	return errors.New("removing container " + id + ": refused")
}

// TestGCJSONFailure: under --json, a removal that failed still fails gc,
// after the document of what was removed.
func TestGCJSONFailure(t *testing.T) {
	useEngine(t, &refusingEngine{leftoverEngine{
		containers: []dockerx.Resource{leftover("c-dead", "run-x", deadPID, false)},
		networks:   []dockerx.Resource{leftover("n-dead", "run-x", deadPID, false)},
	}})
	code, out, errs := run(t, "gc", "--json", "--runs-dir", t.TempDir())
	if code == ExitOK || !strings.Contains(errs, "removing container c-dead: refused") {
		t.Errorf("gc --json = %d, stderr %q; want a failure naming the container", code, errs)
	}
	if !strings.HasPrefix(out, "{\n  \"schema\": \""+gcSchema+"\"") || !strings.Contains(out, `"n-dead"`) || strings.Count(out, `"schema"`) != 1 {
		t.Errorf("stdout is not the one gc document with the network removed:\n%s", out)
	}
}
