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
