//go:build linux && !amd64 && !arm64

package harden

// auditArch 0 makes every seccomp layer report itself unavailable.
const auditArch = 0

const hasX32 = false

var legacyModeRules []modeRule
