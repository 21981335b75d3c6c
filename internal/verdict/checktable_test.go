package verdict

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

func TestParseCheckTable(t *testing.T) {
	out := "CHECK                     RESULT  DETAIL\n" +
		"sidecar tools             ok      4 tools: a, b\n" +
		"no route out              FAIL    default route via eth0\n" +
		"some other line\n"
	want := []runs.Check{{Name: "sidecar tools", OK: true, Detail: "4 tools: a, b"}, {Name: "no route out", Detail: "default route via eth0"}}
	if diff := cmp.Diff(want, parseCheckTable(out)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCheckTableDegradesOnlyTheRoute(t *testing.T) {
	tests := []struct {
		name     string
		table    string
		allowOld bool
		wantOK   bool
	}{
		{"route only, old engine accepted", "no route out  FAIL  default route via eth0\nsidecar tools  ok  4\n", true, true},
		{"route only, not accepted", "no route out  FAIL  default route via eth0\n", false, false},
		{"another failure", "no route out  FAIL  x\ngateway refuses .invalid  FAIL  answered 200\n", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checks, degraded := CheckTable(tt.table, 1, tt.allowOld)
			ok := true
			for _, c := range checks {
				ok = ok && c.OK
			}
			if ok != tt.wantOK {
				t.Errorf("verdict ok %v, want %v", ok, tt.wantOK)
			}
			if tt.allowOld && len(degraded) != 1 {
				t.Errorf("degradations %q, want the route's", degraded)
			}
		})
	}
}
