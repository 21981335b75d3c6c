package inside

import "testing"

// TestWeakest: of a role's processes, the check judges the least
// hardened: one not hardened before any that is, then the fewest
// filters (red team, session 37: under the launcher the supervisor was
// read, the workload's stage never).
func TestWeakest(t *testing.T) {
	supervisor := ProcStatus{Seccomp: 2, SeccompFilters: 2, NoNewPrivs: true, UID: 65532}
	stage := ProcStatus{Seccomp: 2, SeccompFilters: 3, NoNewPrivs: true, UID: 65532}
	bare := ProcStatus{Seccomp: 2, SeccompFilters: 1, NoNewPrivs: true, UID: 65532}
	capable := ProcStatus{Seccomp: 2, SeccompFilters: 4, NoNewPrivs: true, CapEff: 1 << 21, UID: 65532}
	for _, tt := range []struct {
		name string
		in   []ProcStatus
		want ProcStatus
	}{
		{"none", nil, ProcStatus{}},
		{"one", []ProcStatus{stage}, stage},
		{"fewest filters", []ProcStatus{stage, supervisor}, supervisor},
		{"unhardened first", []ProcStatus{supervisor, bare, stage}, bare},
		{"a capability", []ProcStatus{stage, capable, supervisor}, capable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Weakest(tt.in...); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if !supervisor.Hardened() || bare.Hardened() || capable.Hardened() || (ProcStatus{Seccomp: 2, SeccompFilters: 2, NoNewPrivs: true}).Hardened() {
		t.Error("Hardened misjudges: want the supervisor hardened, and not one with one filter, a capability, or root")
	}
}
