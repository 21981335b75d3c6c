package testutil

import (
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// StartOrder records the steps of a role's start, in the order they
// happen, for the tests that check each role's Serve hardens after its
// set-up and before it serves.
type StartOrder struct {
	mu     sync.Mutex
	events []string
}

// Add records one step.
func (s *StartOrder) Add(event string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, event)
}

// Events returns the steps recorded so far, consecutive repeats folded.
func (s *StartOrder) Events() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Compact(slices.Clone(s.events))
}

// Count is how many times event was recorded.
func (s *StartOrder) Count(event string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.events {
		if e == event {
			n++
		}
	}
	return n
}

// Listen is net.Listen recording "listen" when it succeeds, "accept"
// when the listener is first asked for a connection (serving has begun)
// and "close" when it is closed.
func (s *StartOrder) Listen(network, addr string) (net.Listener, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	s.Add("listen")
	return &recordingListener{Listener: ln, order: s}, nil
}

// WaitFor fails t unless event is recorded within 10 seconds.
func (s *StartOrder) WaitFor(t testing.TB, event string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if slices.Contains(s.Events(), event) {
			return
		}
	}
	t.Fatalf("no %q within 10s; steps: %v", event, s.Events())
}

type recordingListener struct {
	net.Listener
	order *StartOrder
}

func (l *recordingListener) Accept() (net.Conn, error) {
	l.order.Add("accept")
	return l.Listener.Accept()
}

func (l *recordingListener) Close() error {
	l.order.Add("close")
	return l.Listener.Close()
}
