package runs

import "testing"

func TestKernelSummary(t *testing.T) {
	tests := []struct {
		k    Kernel
		want string
	}{
		{Kernel{Release: "6.18.44", LandlockABI: 7, Seccomp: "loaded", Cgroup: "v1", MemoryLimitBytes: 268435456, PidsLimit: 256},
			"Linux 6.18.44, Landlock ABI 7, seccomp filter loaded, cgroup v1: memory limit 268435456 bytes, pids limit 256"},
		{Kernel{Release: "6.10.14-linuxkit", Cgroup: "v2"},
			"Linux 6.10.14-linuxkit, Landlock ABI 0, seccomp filter not tried (the role stopped before), cgroup v2: no memory limit, no pids limit"},
		{Kernel{Seccomp: "refused: function not implemented", Error: "reading /sys/fs/cgroup/pids.max: no such file"},
			"Linux (release unknown), Landlock ABI 0, seccomp filter refused: function not implemented, no memory limit, no pids limit (reading /sys/fs/cgroup/pids.max: no such file)"},
	}
	for _, tt := range tests {
		if got := tt.k.Summary(); got != tt.want {
			t.Errorf("got  %q\nwant %q", got, tt.want)
		}
	}
}
