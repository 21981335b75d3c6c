//go:build !unix

package timeline

import (
	"testing"
	"time"
)

// cpuTime is 0 off Unix (no getrusage): the benchmark's cpu-ms/op reads 0.
func cpuTime(testing.TB) time.Duration { return 0 }
