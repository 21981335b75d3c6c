package launcher

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/noexec"
)

// requiredMountOptions are the per-mount options every mount the workload
// can write through must carry. noexec: the kernel then refuses an
// executable mapping of a file written there (Landlock's execute right
// does not see mmap); nosuid and nodev: a setuid file or a device node
// written there is not honoured (the workload has no capability to make
// either today; the mount is the layer that does not depend on that).
var requiredMountOptions = []string{"noexec", "nosuid", "nodev"}

// mountProblem is a writable mount that lacks a required option.
type mountProblem struct {
	Path    string   // the writable directory or file of the policy
	Point   string   // the mount
	Options []string // its per-mount options
	Missing []string
	// Holding is true for the mount that holds Path itself (Path is at or
	// below its point), false for one mounted below Path.
	Holding bool
}

func (p mountProblem) Error() string {
	where := "the mount holding it"
	if !p.Holding {
		where = "a mount below it"
	}
	return fmt.Sprintf("writable path %s: %s, %s (%s), is not %s: a file the workload writes there could be mapped executable or honoured as setuid or a device",
		p.Path, where, p.Point, strings.Join(p.Options, ","), strings.Join(p.Missing, ","))
}

// writableMountProblems checks, in a mount table (in the order of
// /proc/self/mountinfo), every mount the workload can write through path:
// the one that holds path (the last, so the topmost, at the longest point
// path lies at or below) and every mount at or below path, shadowed ones
// too (failing closed). A read-only mount is not written through and is
// not judged. A mount the policy does not name, such as an image VOLUME
// below /tmp, is exactly what this finds: the launcher's statfs of the
// path alone sees only the mount that holds it.
func writableMountProblems(ms []noexec.MountPoint, path string) []mountProblem {
	holding := -1
	for i, m := range ms {
		if within(path, m.Point) && (holding < 0 || len(m.Point) >= len(ms[holding].Point)) {
			holding = i
		}
	}
	var out []mountProblem
	for i, m := range ms {
		if i != holding && !within(m.Point, path) {
			continue
		}
		if slices.Contains(m.Options, "ro") {
			continue
		}
		var missing []string
		for _, o := range requiredMountOptions {
			if !slices.Contains(m.Options, o) {
				missing = append(missing, o)
			}
		}
		if len(missing) > 0 {
			out = append(out, mountProblem{Path: path, Point: m.Point, Options: m.Options, Missing: missing, Holding: i == holding})
		}
	}
	return out
}
