//go:build !linux

package cli

import "context"

// platformCommands: a host binary for Windows or macOS has no
// in-container role and no helper (roles_linux.go).
func platformCommands() commandSet { return commandSet{} }

// runRole: no role runs off Linux (roles_linux.go).
func runRole(context.Context, []string, Streams) (int, bool) { return 0, false }

// reportedExit: no role's error off Linux (roles_linux.go).
func reportedExit(error) (int, bool) { return 0, false }
