package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// Limits bound what one client, or many, can make the gateway hold.
type Limits struct {
	MaxConcurrent     int           // CONNECT tunnels plus forwarded requests in flight
	MaxHeaderBytes    int           // request line plus headers
	ReadHeaderTimeout time.Duration // slowloris: a request's headers must arrive within this
	ResolveTimeout    time.Duration // one DNS lookup
	DialTimeout       time.Duration // one upstream connect
	IdleTimeout       time.Duration // a tunnel with no bytes either way is closed
	MaxDuration       time.Duration // total lifetime of a tunnel or forwarded request
}

// DefaultLimits are sized for one sandbox run: a handful of clients, a few
// hundred tunnels at most, model responses that stream for minutes.
func DefaultLimits() Limits {
	return Limits{
		MaxConcurrent:     1024,
		MaxHeaderBytes:    32 << 10,
		ReadHeaderTimeout: 10 * time.Second,
		ResolveTimeout:    5 * time.Second,
		DialTimeout:       10 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxDuration:       time.Hour,
	}
}

// Options configure a [Gateway].
type Options struct {
	Policy   *netpolicy.Policy // required
	Log      *DecisionLog      // required
	Resolver Resolver          // nil: net.DefaultResolver
	RunID    string            // copied into every decision line
	Limits   Limits            // zero fields take DefaultLimits
	Logger   *slog.Logger      // operational errors; nil: discarded
	// Injection, when set, makes the gateway hold credentials and serve
	// the credential listener ([Gateway.ServeCredentials]).
	Injection *Injection
	// Scopes, when set, judges every request under its scope (scope.go).
	Scopes *Scoper
	// Relay, when set, makes the gateway relay the agent's own
	// telemetry ([Gateway.ServeRelay], relay.go).
	Relay *Relay
}

// Gateway is the egress proxy. Serve it with [Gateway.Serve]; stop it
// with [Gateway.Shutdown].
type Gateway struct {
	policy   *netpolicy.Policy
	log      *DecisionLog
	resolver Resolver
	runID    string
	limits   Limits
	logger   *slog.Logger
	slots    chan struct{}
	srv      *http.Server
	fwd      http.Handler
	// fwdPool and injectPool keep upstream connections (pool.go).
	fwdPool    *upstreamPool
	injectPool *upstreamPool
	// inject and injectSrv are the credential listener's; nil without
	// an [Injection].
	inject    *Injection
	injectSrv *http.Server
	// relaySrv serves the agent's telemetry relay; nil without a [Relay].
	relaySrv *http.Server
	// held searches the proxy port's requests for every held value
	// (held.go); nil without credentials.
	held   *heldSearch
	scopes *Scoper
	// dial connects to one checked address; tests replace it so that no
	// packet leaves the machine.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	now  func() time.Time

	// stopCtx is cancelled by Shutdown with [errStopped] as the cause;
	// every forwarded request's exchange runs under it (untilStopped), so
	// those in flight end now, each with its decision line, instead of
	// outliving the process.
	stopCtx context.Context
	stopAll context.CancelCauseFunc

	mu      sync.Mutex
	closing bool
	// full is set, under mu, once the decision log is full
	// ([ErrLogFull]): every request is refused from then on (full.go).
	full    atomic.Bool
	tunnels map[*tunnel]struct{}
	wg      sync.WaitGroup

	// accepted counts the requests given a decision line to write
	// (newDecision), recorded the lines written (record): the gateway's
	// own account of its record, reported at exit ([Gateway.Counts]).
	accepted, recorded atomic.Int64
}

// Counts is the gateway's own account of its record: the requests it
// accepted (each owes exactly one decision line) and the lines it wrote.
// A difference means lines are missing: the log filled (its last line
// says so), or a request outlived the shutdown.
type Counts struct {
	Accepted int64 `json:"accepted"`
	Recorded int64 `json:"recorded"`
}

// Counts is the account so far; final once [Gateway.Shutdown] returned.
func (g *Gateway) Counts() Counts {
	return Counts{Accepted: g.accepted.Load(), Recorded: g.recorded.Load()}
}

// New builds a Gateway from opts.
func New(opts Options) (*Gateway, error) {
	if opts.Policy == nil || opts.Log == nil {
		return nil, errors.New("egress gateway: policy and decision log are required")
	}
	g := &Gateway{
		policy:   opts.Policy,
		log:      opts.Log,
		resolver: opts.Resolver,
		runID:    opts.RunID,
		limits:   withDefaults(opts.Limits),
		logger:   opts.Logger,
		tunnels:  map[*tunnel]struct{}{},
		now:      time.Now,
		scopes:   opts.Scopes,
	}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if g.logger == nil {
		g.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	g.stopCtx, g.stopAll = context.WithCancelCause(context.Background())
	g.slots = make(chan struct{}, g.limits.MaxConcurrent)
	d := &net.Dialer{Timeout: g.limits.DialTimeout, ControlContext: g.control}
	g.dial = d.DialContext
	g.fwd = g.newForwarder()
	if opts.Injection != nil {
		in := *opts.Injection
		in.Credentials = slices.Clone(in.Credentials)
		if err := in.validate(); err != nil {
			return nil, err
		}
		g.inject = &in
		g.held = newHeldSearch(credentialRefs(in.Credentials, nil))
	}
	g.srv = &http.Server{
		Handler:           g,
		MaxHeaderBytes:    g.limits.MaxHeaderBytes,
		ReadHeaderTimeout: g.limits.ReadHeaderTimeout,
		ReadTimeout:       0, // bodies and tunnels have their own limits
		IdleTimeout:       g.limits.ReadHeaderTimeout,
		ConnContext:       rawHeaderContext,
		ErrorLog:          slog.NewLogLogger(g.logger.Handler(), slog.LevelWarn),
		// Threat: net/http answers "OPTIONS *" itself, unlogged and
		// keeping the connection open, so a request pipelined after it
		// was compared with the OPTIONS header block. Every request,
		// OPTIONS * included, reaches the gateway's handler.
		DisableGeneralOptionsHandler: true,
	}
	if g.inject != nil {
		g.injectSrv = g.newInjector(g.inject)
	}
	if opts.Relay != nil {
		var err error
		if g.relaySrv, err = g.newRelay(*opts.Relay); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func withDefaults(l Limits) Limits {
	d := DefaultLimits()
	set := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	if l.MaxConcurrent <= 0 {
		l.MaxConcurrent = d.MaxConcurrent
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	set(&l.ReadHeaderTimeout, d.ReadHeaderTimeout)
	set(&l.ResolveTimeout, d.ResolveTimeout)
	set(&l.DialTimeout, d.DialTimeout)
	set(&l.IdleTimeout, d.IdleTimeout)
	set(&l.MaxDuration, d.MaxDuration)
	return l
}

// Serve accepts connections on ln until [Gateway.Shutdown]; it then
// returns nil.
func (g *Gateway) Serve(ln net.Listener) error {
	err := g.srv.Serve(&recordingListener{Listener: ln, limit: g.limits.MaxHeaderBytes + 4096})
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting, closes every open tunnel and cancels every
// request in flight, being judged or forwarded (each writes its decision
// line, with an [ErrorInterrupted] error when it was forwarding), waits
// (until ctx is done) for the handlers to return, and waits for every
// decision line to be written. A handler still running then (a write to
// a client that reads nothing blocks whatever its context says) has its
// connection closed, which ends it with its line, and gets [LateWait]
// more. The caller then closes the [DecisionLog] and reports
// [Gateway.Counts]. The threat: a request still forwarded when the
// harness kills the process would have reached its upstream with no line
// at all; waiting for it to be answered could outlast the harness's stop
// grace.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	g.closing = true
	for t := range g.tunnels {
		t.interrupted.Store(true)
		t.close()
	}
	g.mu.Unlock()
	g.stopAll(errStopped)
	// Both listeners stop accepting at once: a silent connection on one
	// must not keep the other open for the whole wait (red team, issue 26).
	var ierr error
	var iwg sync.WaitGroup
	if g.injectSrv != nil {
		iwg.Go(func() { ierr = g.injectSrv.Shutdown(ctx) })
	}
	var rerr error
	if g.relaySrv != nil {
		iwg.Go(func() { rerr = g.relaySrv.Shutdown(ctx) })
	}
	err := g.srv.Shutdown(ctx)
	iwg.Wait()
	err = errors.Join(err, ierr, rerr)
	g.fwdPool.close()
	if g.injectPool != nil {
		g.injectPool.close()
	}
	if !g.waitHandlers(ctx) {
		g.closeConnections()
		late, cancel := context.WithTimeout(context.Background(), LateWait)
		defer cancel()
		if !g.waitHandlers(late) {
			c := g.Counts()
			return fmt.Errorf("shutting down: requests still in flight after the wait and %v more, their lines unwritten (%d accepted, %d recorded)", LateWait, c.Accepted, c.Recorded)
		}
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}

// LateWait is how long [Gateway.Shutdown] waits, past its own deadline,
// for the handlers whose connections it closed to write their lines.
// Shutdown's wait ([DefaultShutdownWait]) plus this stays below the
// harness's stop grace.
const LateWait = time.Second

// waitHandlers waits for every request handler and tunnel to be done, or
// for ctx; it reports whether they are.
func (g *Gateway) waitHandlers(ctx context.Context) bool {
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// closeConnections closes every client connection of both listeners.
func (g *Gateway) closeConnections() {
	g.srv.Close()
	if g.injectSrv != nil {
		g.injectSrv.Close()
	}
	if g.relaySrv != nil {
		g.relaySrv.Close()
	}
}

// ServeHTTP routes one request: CONNECT, absolute-URI forward, or the
// readiness probe. Once the decision log is full, every request, the
// probe included, is refused here (full.go).
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.full.Load() {
		refuseFull(w)
		return
	}
	ctx, stop := g.untilStopped(r.Context())
	defer stop()
	r, reason := claimRequest(r.WithContext(ctx))
	if reason != "" {
		d := g.newDecision(r)
		d.Host = truncate(r.Host, 255)
		g.refuse(w, d, deny(http.StatusBadRequest, "%s", reason))
		return
	}
	if r.Method != http.MethodConnect && !r.URL.IsAbs() {
		g.serveOrigin(w, r)
		return
	}
	d := g.newDecision(r)
	// done releases the slot; a tunnel calls it when it ends, which is
	// after this handler has returned.
	done, ok := g.takeSlot(w, d)
	if !ok {
		return
	}
	if r.Method == http.MethodConnect {
		g.serveConnect(w, r, d, done)
		return
	}
	defer done()
	g.serveForward(w, r, d)
}

// takeSlot takes one of the gateway's concurrent slots for d's request,
// or refuses it, with its decision line, when every one is in use;
// release gives the slot back.
func (g *Gateway) takeSlot(w http.ResponseWriter, d *Decision) (release func(), ok bool) {
	g.wg.Add(1)
	select {
	case g.slots <- struct{}{}:
		return func() { <-g.slots; g.wg.Done() }, true
	default:
		g.wg.Done()
		g.refuse(w, d, deny(http.StatusServiceUnavailable, "gateway at capacity: %d concurrent tunnels and requests", g.limits.MaxConcurrent))
		return nil, false
	}
}

// serveListener is the entry of the gateway's own listeners (the
// credential listener, the telemetry relay): every request is refused
// once the decision log is full; the readiness probe is answered;
// any other request gets the gateway's stop context, its decision
// (filled in by describe, when given, before anything can refuse it) and
// a slot, and handle serves it.
func (g *Gateway) serveListener(w http.ResponseWriter, r *http.Request, describe func(*http.Request, *Decision), handle func(http.ResponseWriter, *http.Request, *Decision)) {
	if g.full.Load() {
		refuseFull(w)
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/healthz" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
		return
	}
	ctx, stop := g.untilStopped(r.Context())
	defer stop()
	r = r.WithContext(ctx)
	d := g.newDecision(r)
	if describe != nil {
		describe(r, d)
	}
	release, ok := g.takeSlot(w, d)
	if !ok {
		return
	}
	defer release()
	handle(w, r, d)
}

// serveOrigin answers origin-form requests: only the readiness probe.
// Nothing here is proxied, so an origin-form request for anything else is
// a client that forgot it talks to a proxy.
func (g *Gateway) serveOrigin(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/healthz" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if mustClose(r) {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, "ok\n")
		return
	}
	d := g.newDecision(r)
	d.Host = truncate(r.Host, 255)
	g.refuse(w, d, deny(http.StatusBadRequest, "not a proxy request: send an absolute URI or CONNECT host:port"))
}

// newDecision starts the decision line r owes: from here the request is
// accepted, and [Gateway.record] must write its line exactly once.
func (g *Gateway) newDecision(r *http.Request) *Decision {
	g.accepted.Add(1)
	return &Decision{
		headBytes:     requestHeadBytes(r),
		Time:          g.now().UTC(),
		RunID:         g.runID,
		Client:        r.RemoteAddr,
		Method:        truncate(r.Method, 32),
		CorrelationID: traceID(r.Header.Values("Traceparent")),
		ScopeClaim:    r.Header.Values(HeaderScope),
	}
}

// refuse logs d as a denial and answers the client with the reason.
func (g *Gateway) refuse(w http.ResponseWriter, d *Decision, dn *denial) {
	d.Decision = Deny
	d.Reason = dn.reason
	g.record(d)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(dn.status)
	fmt.Fprintf(w, "mcpsidecar egress gateway: denied: %s\n", dn.reason)
}

// ErrorInterrupted begins the error of a decision line whose request or
// tunnel was cut off by the gateway's shutdown.
const ErrorInterrupted = "interrupted"

// DefaultShutdownWait is the gateway role's default --shutdown-timeout:
// how long shutdown waits for the cancelled requests' handlers to return.
// It is kept well below the harness's stop grace (orchestrate.StopGrace),
// after which the role is killed.
const DefaultShutdownWait = 2 * time.Second

// errStopped is the cause [Gateway.Shutdown] cancels requests with.
var errStopped = errors.New(ErrorInterrupted + ": the gateway shut down during the request")

// untilStopped is ctx, also cancelled (cause [errStopped]) when the
// gateway shuts down, or (cause [ErrLogFull]) when its decision log
// fills. Each request's handler runs under it from its entry, so a
// request still being decided at shutdown (a name lookup, a dial) ends
// at once with its line too, instead of outliving the wait.
func (g *Gateway) untilStopped(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(g.stopCtx, func() { cancel(context.Cause(g.stopCtx)) })
	return ctx, func() { stop(); cancel(context.Canceled) }
}

// interruptedError is the decision line's error for a request cut off by
// shutdown; err is what the request itself saw, if anything.
func interruptedError(err error) string {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, errStopped) {
		return errStopped.Error()
	}
	return errStopped.Error() + " (" + err.Error() + ")"
}

// record writes d's line, once: a second call for the same request is a
// bug, logged and not written.
func (g *Gateway) record(d *Decision) {
	if d.written {
		g.logger.Error("a second decision line for one request, not written", "method", d.Method, "host", d.Host, "correlation_id", d.CorrelationID)
		return
	}
	d.written = true
	d.BytesUp += d.headBytes
	d.DurationMS = float64(g.now().Sub(d.Time).Microseconds()) / 1000
	err := g.log.Record(*d)
	if err == nil {
		g.recorded.Add(1)
	}
	switch {
	case errors.Is(err, ErrLogFull):
		g.failClosed(err)
	case err != nil:
		g.logger.Error("recording decision", "err", err)
	}
}

// hostPort splits what the dial target is, with the scheme's default port.
func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// credentialRefs are pointers to every credential of cs but except.
func credentialRefs(cs []Credential, except *Credential) []*Credential {
	var out []*Credential
	for i := range cs {
		if &cs[i] != except {
			out = append(out, &cs[i])
		}
	}
	return out
}
