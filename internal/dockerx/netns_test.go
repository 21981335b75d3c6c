//go:build linux

package dockerx

import "testing"

func TestListeningIn(t *testing.T) {
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000 65532        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:0C38 0100007F:9C40 01 00000000:00000000 00:00000000 00000000 65532        0 2 1 0000000000000000 20 4 30 10 -1
`
	for _, tt := range []struct {
		port int
		want bool
	}{
		{8000, true},  // 0x1F40 listening
		{3128, false}, // 0x0C38 established only
		{80, false},
	} {
		if got := listeningIn(table, tt.port); got != tt.want {
			t.Errorf("listeningIn(port %d) = %v, want %v", tt.port, got, tt.want)
		}
	}
}

func TestParseProcStatus(t *testing.T) {
	const status = "Name:\tmcpsidecar\nUid:\t65532\t65532\t65532\t65532\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t2\n"
	got, err := parseProcStatus(status)
	if err != nil {
		t.Fatal(err)
	}
	want := ProcStatus{Seccomp: 2, SeccompFilters: 2, NoNewPrivs: true, UID: 65532}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	root, err := parseProcStatus("Uid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\nNoNewPrivs:\t0\nSeccomp:\t0\n")
	if err != nil || root.UID != 0 || root.CapEff == 0 || root.NoNewPrivs || root.Seccomp != 0 {
		t.Errorf("unhardened status read as %+v, %v", root, err)
	}
	if _, err := parseProcStatus("Name:\tx\n"); err == nil {
		t.Error("a status without the security lines was accepted")
	}
}
