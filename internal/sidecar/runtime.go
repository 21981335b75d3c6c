package sidecar

import "runtime/debug"

// GCPercent is the sidecar role's GOGC. Go's default (100) collects when the
// heap doubles, but never below a 4 MiB goal; the sidecar's live heap is
// about 1 MiB while go-sdk allocates about 300 KiB per call, so at the
// default it collects every dozen calls and GC took a quarter of its CPU.
// A higher percent raises the minimum goal with it (4 MiB × GCPercent/100)
// and collects proportionally less often. It is safe in the container,
// where GOMEMLIMIT (3/4 of the container's memory, see internal/harden)
// makes the collector run harder before the heap can outgrow the limit,
// whatever the percent; the value is chosen to keep peak RSS well under the
// 40 MB target (docs/PERFORMANCE.md, issue 19).
const GCPercent = 400

// TuneGC sets the garbage collector for the sidecar role: [GCPercent],
// unless getenv("GOGC") is set (the user's choice wins). It returns the
// percent in force. The role calls it once at start; it is process-wide, so
// [New] does not (an embedding program keeps its own setting).
func TuneGC(getenv func(string) string) int {
	if getenv("GOGC") != "" {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}
	debug.SetGCPercent(GCPercent)
	return GCPercent
}
