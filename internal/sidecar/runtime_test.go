//go:build linux

package sidecar

import (
	"runtime/debug"
	"testing"
)

// TestTuneGC: the role's GC percent applies unless GOGC is set, in which
// case the percent the runtime read from GOGC stays.
func TestTuneGC(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "GOGC" {
				return v
			}
			return ""
		}
	}
	if got := TuneGC(env("")); got != GCPercent {
		t.Errorf("TuneGC without GOGC = %d, want %d", got, GCPercent)
	}
	if got := debug.SetGCPercent(150); got != GCPercent {
		t.Errorf("runtime GC percent = %d, want %d", got, GCPercent)
	}
	// With GOGC=150 in the environment the runtime already runs at 150.
	if got := TuneGC(env("150")); got != 150 {
		t.Errorf("TuneGC with GOGC=150 = %d, want 150 (left alone)", got)
	}
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("runtime GC percent = %d, want 150", got)
	}
}
