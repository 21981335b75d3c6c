//go:build linux

package harden

import (
	"os"

	"golang.org/x/sys/unix"
)

// measureKernel reads the kernel's release and the container's cgroup
// limits. It runs before the Landlock ruleset, which grants no role
// /sys.
func measureKernel() Kernel {
	var k Kernel
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		k.Release = unix.ByteSliceToString(u.Release[:])
	}
	readCgroupLimits(os.DirFS(cgroupRoot), &k)
	return k
}
