package agent

import (
	"context"
	"net/http"
	"net/url"

	"github.com/mcpsidecar/mcpsidecar/internal/trace"
)

// traceKey carries the W3C trace-id of the current model request or tool
// call through the context down to the HTTP transports.
type traceKey struct{}

// newTraceID returns 32 lower-case hex digits, never all zero.
func newTraceID() string { return trace.NewID() }

// withTrace returns ctx carrying id.
func withTrace(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, traceKey{}, id)
}

// traceFrom returns the trace-id in ctx, or "".
func traceFrom(ctx context.Context) string {
	id, _ := ctx.Value(traceKey{}).(string)
	return id
}

// traceparent formats a W3C traceparent header (version 00, sampled) for id
// with a fresh span id (internal/trace).
func traceparent(id string) string { return trace.Parent(id) }

// traceTransport sets traceparent on every request whose context carries a
// trace-id, so the sidecar and the gateway can join their records to the
// agent's turn.
type traceTransport struct{ next http.RoundTripper }

func (t traceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	id := traceFrom(req.Context())
	if id == "" {
		return t.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set("traceparent", traceparent(id))
	return t.next.RoundTrip(req)
}

// newTransport is the base transport for the agent's clients: the explicit
// proxy function, traceparent on the CONNECT request too, and no keep-alive
// to the proxy, so that every request opens its own tunnel and the gateway
// can attribute each tunnel to one call.
func newTransport(proxy func(*url.URL) (*url.URL, error), keepAlive bool) http.RoundTripper {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.Proxy = func(r *http.Request) (*url.URL, error) {
		if proxy == nil {
			return nil, nil
		}
		return proxy(r.URL)
	}
	base.DisableKeepAlives = !keepAlive
	base.OnProxyConnectResponse = connectRefusal
	base.GetProxyConnectHeader = func(ctx context.Context, _ *url.URL, _ string) (http.Header, error) {
		if id := traceFrom(ctx); id != "" {
			return http.Header{"Traceparent": {traceparent(id)}}, nil
		}
		return nil, nil
	}
	return traceTransport{next: base}
}
