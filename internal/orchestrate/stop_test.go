package orchestrate

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestStopKillsAfterGrace: a service that does not exit within the stop
// grace of its SIGTERM gets SIGKILL, its exit code (137) is recorded and it
// is marked KilledAtStop (the verdict fails the run on it: its last records
// may be missing); one that exits on SIGTERM gets no SIGKILL and no mark. A
// gateway that stops after the sidecar (Step.StopAfter) is signalled only
// once the killed sidecar has exited. The grace is shortened to keep the
// test fast; the path is the one the default StopGrace takes.
func TestStopKillsAfterGrace(t *testing.T) {
	const grace = 100 * time.Millisecond
	for _, tc := range []struct {
		name   string
		ignore string // the role that survives SIGTERM
	}{
		{"sidecar ignores TERM", RoleSidecar},
		{"gateway ignores TERM", RoleGateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newOrderRig(t, true, 0)
			r.s.Plan.Containers[0].StopAfter = []string{RoleSidecar}
			if err := r.apply(t); err != nil {
				t.Fatal(err)
			}
			ids := map[string]string{RoleGateway: "id-gw", RoleSidecar: "id-sc"}
			r.f.Ignores = map[string][]string{ids[tc.ignore]: {"TERM"}}
			r.s.StopGrace = grace
			start := time.Now()
			r.s.Stop(t.Context())
			if d := time.Since(start); d < grace || d > grace+time.Second {
				t.Errorf("Stop took %v, want the grace (%v) and little more", d, grace)
			}
			calls := r.f.CallList()
			for role, id := range ids {
				c := r.s.Find(role)
				killed := role == tc.ignore
				if c.KilledAtStop != killed {
					t.Errorf("%s: KilledAtStop = %v, want %v", role, c.KilledAtStop, killed)
				}
				if c.ExitCode == nil || *c.ExitCode != 137 {
					t.Errorf("%s: exit code %v, want 137", role, c.ExitCode)
				}
				if got := slices.Contains(calls, "kill "+id+" KILL"); got != killed {
					t.Errorf("%s: SIGKILL sent = %v, want %v: %q", role, got, killed, calls)
				}
				if !killed {
					continue
				}
				if i, j := slices.Index(calls, "kill "+id+" TERM"), slices.Index(calls, "kill "+id+" KILL"); i < 0 || j < i {
					t.Errorf("%s: want TERM, then KILL: %q", role, calls)
				}
			}
			// The gateway waits for the sidecar's end, its kill included.
			if i, j := slices.Index(calls, "kill id-sc "+lastSignal(calls, "id-sc")), slices.Index(calls, "kill id-gw TERM"); i < 0 || j < i {
				t.Errorf("want the gateway signalled after the sidecar's last signal: %q", calls)
			}
		})
	}
}

// lastSignal is the last signal calls send to id.
func lastSignal(calls []string, id string) string {
	var sig string
	for _, c := range calls {
		if s, ok := strings.CutPrefix(c, "kill "+id+" "); ok {
			sig = s
		}
	}
	return sig
}
