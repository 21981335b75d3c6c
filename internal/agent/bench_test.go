package agent

import (
	"context"
	"io"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/agent/fakemodel"
)

// BenchmarkRunTask is one whole agent run on loopback (four model turns,
// two sidecar calls, the save): the agent's own overhead, with model and
// tools answering instantly.
func BenchmarkRunTask(b *testing.B) {
	cfg, _, _ := setup(b, fakemodel.Task)
	b.ReportAllocs()
	for b.Loop() {
		if err := Run(context.Background(), cfg, io.Discard, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
