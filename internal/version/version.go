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
