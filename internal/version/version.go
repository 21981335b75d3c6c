// Package version holds the build's version, stamped at link time with
// -ldflags "-X github.com/mcpsidecar/mcpsidecar/internal/version.Version=…".
// It must not import anything from this module.
package version

import "runtime/debug"

// Version is set by the linker; "dev" marks an unstamped build.
var Version = "dev"

// String returns the version followed by the VCS revision when the build
// recorded one.
func String() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Version
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return Version + " (" + s.Value[:12] + ")"
		}
	}
	return Version
}

// RoleBinaries are the SHA-256 digests (hex, space-separated) of the role
// binaries (cmd/mcpsidecar-role) built with this host binary by `make
// build` or `make dist`, stamped by the linker (-X): internal/rolebin uses
// a role binary found beside this one only when its digest is here, so a
// stale one, or one of another build, never goes into an image. Empty for
// a binary built otherwise (go install), which puts itself into the image.
var RoleBinaries = ""
