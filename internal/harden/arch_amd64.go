//go:build linux

package harden

import "golang.org/x/sys/unix"

// auditArch is the only architecture the seccomp filter lets through.
const auditArch = unix.AUDIT_ARCH_X86_64

// hasX32 says the x32 ABI (syscall numbers with bit 30 set) must be refused.
const hasX32 = true

// legacyModeRules are amd64's mode-taking syscalls that newer
// architectures only have in their *at forms.
var legacyModeRules = []modeRule{
	{"chmod", unix.SYS_CHMOD, 1, -1},
	{"mknod", unix.SYS_MKNOD, 1, -1},
	{"creat", unix.SYS_CREAT, 1, -1},
	{"open", unix.SYS_OPEN, 2, 1},
}
