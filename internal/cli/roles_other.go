//go:build !linux

package cli

// platformCommands: a host binary for Windows or macOS has no
// in-container role and no helper (roles_linux.go).
func platformCommands() commandSet { return commandSet{} }
