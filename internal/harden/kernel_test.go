package harden

import (
	"strings"
	"testing"
	"testing/fstest"
)

// TestReadCgroupLimits: the limits a container sees of its own cgroup,
// on either hierarchy; "max" (or v1's huge value) is no limit, and what
// cannot be read is said, not taken for no limit.
func TestReadCgroupLimits(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name      string
		fs        fstest.MapFS
		want      Kernel
		wantError string
	}{
		{"v1 limited", fstest.MapFS{
			"memory/memory.limit_in_bytes": file("268435456\n"), "pids/pids.max": file("256\n"),
		}, Kernel{Cgroup: "v1", MemoryLimitBytes: 268435456, PidsLimit: 256}, ""},
		{"v1 unlimited", fstest.MapFS{
			"memory/memory.limit_in_bytes": file("9223372036854771712\n"), "pids/pids.max": file("max\n"),
		}, Kernel{Cgroup: "v1"}, ""},
		{"v2 limited", fstest.MapFS{
			"cgroup.controllers": file("cpu memory pids\n"), "memory.max": file("536870912\n"), "pids.max": file("128\n"),
		}, Kernel{Cgroup: "v2", MemoryLimitBytes: 536870912, PidsLimit: 128}, ""},
		{"v2 unlimited", fstest.MapFS{
			"cgroup.controllers": file(""), "memory.max": file("max\n"), "pids.max": file("max\n"),
		}, Kernel{Cgroup: "v2"}, ""},
		{"v2 without the pids controller", fstest.MapFS{
			"cgroup.controllers": file("memory\n"), "memory.max": file("1048576\n"),
		}, Kernel{Cgroup: "v2", MemoryLimitBytes: 1048576}, "reading /sys/fs/cgroup/pids.max"},
		{"garbage", fstest.MapFS{
			"memory/memory.limit_in_bytes": file("lots\n"), "pids/pids.max": file("-1\n"),
		}, Kernel{Cgroup: "v1"}, `"lots" is not a limit`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Kernel
			readCgroupLimits(tt.fs, &got)
			if tt.wantError == "" && got.Error != "" || !strings.Contains(got.Error, tt.wantError) {
				t.Errorf("error %q, want one containing %q", got.Error, tt.wantError)
			}
			got.Error = ""
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
