package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// TestSpecPhase: the "spec" phase prints the spec's name and fails with
// its reading error (exit 3) or, when none was given, says so, before
// anything is created; a valid spec is resolved.
func TestSpecPhase(t *testing.T) {
	unreadable := &spec.Problems{}
	tests := []struct {
		name, wantLine, wantErr string
		in                      SpecInput
		fail                    error
	}{
		{"unreadable", "spec: ./sandbox_spec.toml\n", "", SpecInput{Name: "./sandbox_spec.toml", Err: unreadable}, unreadable},
		{"none given", "", "no sandbox spec given", SpecInput{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, orchestrate.WorkloadCheck)
			r.o.Spec = tt.in
			res, err := r.run(context.Background())
			if code, _ := exitcode.Of(err); code != exitcode.InvalidSpec {
				t.Errorf("exit %d (%v), want %d", code, err, exitcode.InvalidSpec)
			}
			if tt.fail != nil && !errors.Is(err, tt.fail) {
				t.Errorf("error %v, want the reading error", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
			if got := r.errb.String(); !strings.HasPrefix(got, tt.wantLine+"[spec     ]") {
				t.Errorf("stderr %q, want %q then the spec phase's line", got, tt.wantLine)
			}
			if res.RunDir != "" || len(r.f.CallList()) != 0 {
				t.Errorf("run dir %q, engine calls %q: want nothing", res.RunDir, r.f.CallList())
			}
		})
	}
}
