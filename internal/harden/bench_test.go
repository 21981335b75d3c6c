//go:build linux

package harden

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkApplyReexec is the start-up cost of hardening: each iteration
// re-executes the test binary as a child that applies the full test policy
// (host) or nothing (none) and exits. Reported: the median wall time of a
// re-exec and, for host, the median time Apply itself took in the child.
// Run with -benchtime 100x for the median over 100 re-execs.
func BenchmarkApplyReexec(b *testing.B) {
	for _, mode := range []string{"none", "host"} {
		b.Run(mode, func(b *testing.B) {
			f := newFixture(b)
			var wall, apply []time.Duration
			for b.Loop() {
				start := time.Now()
				out := runChild(b, mode, f.policy, nil)
				wall = append(wall, time.Since(start))
				if out.ApplyError != "" {
					b.Fatal(out.ApplyError)
				}
				apply = append(apply, time.Duration(out.Report.DurationMicros)*time.Microsecond)
			}
			b.ReportMetric(float64(median(wall).Microseconds()), "wall-µs-median")
			if mode == "host" {
				b.ReportMetric(float64(median(apply).Microseconds()), "apply-µs-median")
			}
		})
	}
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
