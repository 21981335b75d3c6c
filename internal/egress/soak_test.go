//go:build linux

package egress

import (
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestRecordSoak is the record's invariant under load (issue 26), bounded
// and on loopback only: for each path, MCPSIDECAR_SOAK_REQUESTS requests
// (default 120; `make soak` runs 1,000) in rounds of concurrent requests,
// each asking the upstream for a random answer (whole, streamed, short,
// reset, held) and reading it whole or hanging up mid-answer, on kept-alive
// or fresh connections; in a third of the rounds the gateway is shut down
// at a random moment with requests in flight. After each round the lines
// are compared with what the upstream received: zero missing, zero
// duplicated, and the gateway's counts equal to its lines.
func TestRecordSoak(t *testing.T) {
	n := 120
	if v, err := strconv.Atoi(os.Getenv("MCPSIDECAR_SOAK_REQUESTS")); err == nil && v > 0 {
		n = v
	}
	const perRound = 40
	for _, path := range []string{pathProxy, pathCredential, pathConnect} {
		t.Run(path, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(len(path)), 26))
			var sent, stopped, missing, duplicated int
			for round := 0; sent < n; round++ {
				k := min(perRound, n-sent)
				stop := round%3 == 2
				m, d := soakRound(t, path, rng, sent, k, stop)
				sent += k
				missing += m
				duplicated += d
				if stop {
					stopped++
				}
			}
			t.Logf("%s: %d requests in %d rounds, %d stopped mid-flight: %d lines missing, %d duplicated", path, sent, (n+perRound-1)/perRound, stopped, missing, duplicated)
			if missing+duplicated > 0 {
				t.Errorf("%s: %d lines missing, %d duplicated over %d requests", path, missing, duplicated, sent)
			}
		})
	}
}

// soakRound sends k requests (ids from first) at once through a fresh
// gateway, shutting it down at a random moment when stop is set.
func soakRound(t *testing.T, path string, rng *rand.Rand, first, k int, stop bool) (missing, duplicated int) {
	up := startRecordUpstream(t, answerWhole)
	rr := startRecordRig(t, up)
	clients := []*http.Client{rr.client(path, true), rr.client(path, false)}
	answers := []string{answerWhole, answerWhole, answerStream, answerShort, answerReset, answerHold}
	var wg sync.WaitGroup
	for i := range k {
		c := clients[rng.IntN(len(clients))]
		answer := answers[rng.IntN(len(answers))]
		if !stop && answer == answerHold {
			answer = answerStream // only a shutdown ends a held answer
		}
		reading := readAll
		if rng.IntN(4) == 0 {
			reading = readCutOff
		}
		wg.Add(1)
		go func() { defer wg.Done(); rr.sendAnswer(c, path, first+i, reading, answer) }()
	}
	if stop {
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
		rr.shutdown(t)
		up.releaseAll()
	}
	wg.Wait()
	for _, c := range clients {
		c.CloseIdleConnections()
	}
	if !stop {
		rr.shutdown(t)
	}
	m, d, detail := rr.recordGap(path)
	if m+d > 0 {
		t.Errorf("round at %d (stop %v): %d missing, %d duplicated: %s", first, stop, m, d, detail)
	}
	rr.checkCounts(t)
	return m, d
}
