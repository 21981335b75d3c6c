//go:build linux

package harden

import "golang.org/x/sys/unix"

// auditArch is the only architecture the seccomp filter lets through.
const auditArch = unix.AUDIT_ARCH_X86_64

// hasX32 says the x32 ABI (syscall numbers with bit 30 set) must be refused.
const hasX32 = true
