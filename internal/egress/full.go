package egress

import (
	"fmt"
	"net/http"
)

// The gateway fails closed when its decision log is full: a request the
// log cannot record must not be served. The threat (red team, finding 1):
// a workload fills the log with denied requests, then makes allowed ones
// that reach their upstream and appear nowhere in the record.
//
// Decision lines are written when a request ends, so the switch cuts off
// what is in flight too: [Gateway.failClosed] sets full under mu, closes
// every tunnel and cancels every forwarded request (the stop context,
// cause [ErrLogFull]). A request checks full once at the entry of
// ServeHTTP and once more right before it dials or forwards
// anything, after its exchange's context is tied to the stop context; a tunnel is registered under mu only while the
// gateway is not full (track). So no request starts forwarding after the
// log filled, and the marker line the log wrote says which line was lost.

// failClosed puts the gateway in the refuse-all state, once.
func (g *Gateway) failClosed(why error) {
	g.mu.Lock()
	if g.full.Load() {
		g.mu.Unlock()
		return
	}
	g.full.Store(true)
	for t := range g.tunnels {
		t.close()
	}
	g.mu.Unlock()
	g.stopAll(why)
	g.logger.Error(ReasonLogFull, "err", why)
}

// refuseFull answers a request the gateway cannot record. Nothing is
// logged: the log is full, and its last line says so.
func refuseFull(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintf(w, "mcpsidecar egress gateway: denied: %s\n", ReasonLogFull)
}
