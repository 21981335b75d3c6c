package orchestrate

import (
	"errors"
	"net/netip"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx/dockerxtest"
)

// fakeEngine is the shared fake (internal/dockerx/dockerxtest).
type fakeEngine = dockerxtest.Engine

func newFake() *fakeEngine { return dockerxtest.New() }

// newTestSession is NewSession without the host's routes. The fake's
// proven processes dial through its namespace dialer: it records each
// connection and makes it on this host's loopback (where the tests'
// health servers listen), so a test sees every address the session used.
func newTestSession(f *fakeEngine, plan Plan) *Session {
	s := NewSession(f, plan)
	s.HostPrefixes = func() ([]netip.Prefix, error) { return nil, nil }
	return s
}

var errBoom = errors.New("boom")
