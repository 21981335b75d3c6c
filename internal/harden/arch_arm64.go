//go:build linux

package harden

import "golang.org/x/sys/unix"

// auditArch is the only architecture the seccomp filter lets through.
const auditArch = unix.AUDIT_ARCH_AARCH64

// hasX32 says the x32 ABI must be refused; arm64 has none.
const hasX32 = false

// legacyModeRules: arm64 has only the *at forms of chmod, open, mknod.
var legacyModeRules []modeRule
