//go:build docker

package e2e

// The run's wall time with and without the OpenTelemetry export (issue
// 33), paired in one process: the same offline agent run without a
// collector, exporting (during the run and at its end) to a loopback
// OTLP receiver that takes every span (otel_live_test.go; the
// collector's own work is not the run's), and exporting to a collector
// that accepts connections and never answers, interleaved (the order
// turned each round). One round in the
// suite; the figure in docs/PERFORMANCE.md takes five:
//
//	MCPSIDECAR_OTEL_ROUNDS=5 MCPSIDECAR_BIN=$PWD/bin/mcpsidecar-test \
//	  go test -count=1 -tags docker -run TestOTelWallTimePaired -v ./e2e/

import (
	"net"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hangingCollector accepts connections on loopback and never answers.
func hangingCollector(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String()
}

func TestOTelWallTimePaired(t *testing.T) {
	NeedDocker(t)
	rounds := 1
	if v := os.Getenv("MCPSIDECAR_OTEL_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("MCPSIDECAR_OTEL_ROUNDS=%q: want a positive number", v)
		}
		rounds = n
	}
	rec := httptest.NewServer(&otlpReceiver{parent: map[string]string{}, arrived: map[string]time.Time{}})
	defer rec.Close()
	hang := hangingCollector(t)
	s := agPrepare(t)
	arms := []struct {
		name string
		args []string
	}{
		{"no export", nil},
		{"export to a collector", []string{"--otlp-endpoint", rec.URL}},
		{"collector that never answers", []string{"--otlp-endpoint", "http://" + hang}},
	}
	walls := make([][]time.Duration, len(arms))
	for round := range rounds {
		order := []int{0, 1, 2}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, a := range order {
			r := s.runWith(t, "task", arms[a].args...)
			if r.err != nil {
				t.Fatalf("%s, round %d: mcpsidecar run: %v\nstderr:\n%s", arms[a].name, round+1, r.err, r.stderr)
			}
			switch a {
			case 1:
				if m := exportedTrace.FindStringSubmatch(r.stderr); m == nil {
					t.Errorf("round %d: the run exporting did not say it exported:\n%s", round+1, r.stderr)
				}
			case 2:
				if !strings.Contains(r.stderr, "warning: OpenTelemetry export:") {
					t.Errorf("round %d: no warning with the collector never answering:\n%s", round+1, r.stderr)
				}
			}
			walls[a] = append(walls[a], r.wall)
		}
	}
	med := make([]time.Duration, len(arms))
	for a := range arms {
		slices.Sort(walls[a])
		med[a] = walls[a][len(walls[a])/2]
		t.Logf("FIGURE run wall time, %s: median %s of %d (%v)", arms[a].name, med[a].Round(10*time.Millisecond), len(walls[a]), walls[a])
	}
	// The bound: the export at the end waits at most 5 s; nothing during
	// the run waits on the collector. 3 s more for a loaded machine.
	for a := 1; a < len(arms); a++ {
		if extra := med[a] - med[0]; extra > 8*time.Second {
			t.Errorf("%s: the run took %s longer than without export (bound: the 5 s flush)", arms[a].name, extra)
		}
	}
}
