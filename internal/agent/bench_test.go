package agent

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/agent/fakemodel"
)

// BenchmarkRunTask is one whole agent run on loopback (four model turns,
// two sidecar calls, the save): the agent's own overhead, with model and
// tools answering instantly. It reports the time per model turn, the fake
// model's own time per turn (its handler, the contract check included),
// and the difference: the agent's overhead per turn on top of the model's
// time (MCP calls, turn log, HTTP on loopback included).
func BenchmarkRunTask(b *testing.B) {
	cfg, model, _ := setup(b, fakemodel.Task)
	var modelNS, turns atomic.Int64
	timed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		model.ServeHTTP(w, r)
		modelNS.Add(int64(time.Since(start)))
		turns.Add(1)
	}))
	b.Cleanup(timed.Close)
	cfg.BaseURL = timed.URL + "/v1"
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		if err := Run(context.Background(), cfg, io.Discard, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	n := float64(turns.Load())
	b.ReportMetric(float64(elapsed)/n, "ns/turn")
	b.ReportMetric(float64(modelNS.Load())/n, "model-ns/turn")
	b.ReportMetric((float64(elapsed)-float64(modelNS.Load()))/n, "overhead-ns/turn")
}
