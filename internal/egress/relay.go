package egress

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcpsidecar/mcpsidecar/internal/otlpwire"
)

// The relay of the agent's own telemetry (issue 33, item 4). A workload
// that emits OpenTelemetry (many agent frameworks do) has no route out;
// when the spec asks for it (agent_telemetry = true, a softening in the
// ledger), the gateway takes OTLP/HTTP on a port of its own, judges each
// request, writes its decision line like every other request's, and
// appends the payload, decoded and re-encoded as OTLP/JSON, to a bounded
// spool in its output directory ([RelayLine]). The gateway dials nothing
// for it: the host reads the spool back with the run's record (redacted
// like every artifact) and sends it to the collector the user named.
//
// The threat: the relay is a channel out of the sandbox for whatever the
// workload writes into a span (names, attributes, events, log bodies),
// to a collector outside the allowlist. So it is off by default, bounded
// (per request, per second, per run), takes only well-formed OTLP on the
// three signal paths, and refuses a payload carrying a credential the
// gateway holds.

// RelayRule is the decision line's rule for a relayed request.
const RelayRule = "agent_telemetry relay"

// Defaults of [Relay].
const (
	DefaultRelayMaxBody = 1 << 20  // one request's payload, decompressed
	DefaultRelayBudget  = 16 << 20 // the spool, for the whole run
	DefaultRelayRate    = 20       // requests per second, sustained
	DefaultRelayBurst   = 40       // requests at once
	relayBodyTimeout    = 10 * time.Second
)

// Relay configures the relay listener ([Gateway.ServeRelay]).
type Relay struct {
	// Spool receives one [RelayLine] per relayed request, one Write
	// each; the caller owns it.
	Spool io.Writer
	// MaxBody bounds one payload (after gzip is undone); Budget bounds
	// what the spool takes over the run; Rate and Burst bound requests
	// per second. Zero fields take the defaults.
	MaxBody, Budget int64
	Rate            float64
	Burst           int
}

// RelayLine is one line of the spool (runs.FileAgentTelemetry): a
// payload the relay took, as OTLP/JSON. Its time and correlation id are
// its decision line's.
type RelayLine struct {
	Time          time.Time       `json:"time"`
	Signal        otlpwire.Signal `json:"signal"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	Items         int             `json:"items"`
	OTLP          json.RawMessage `json:"otlp"`
}

// relay serves the relay listener.
type relay struct {
	g      *Gateway
	cfg    Relay
	bucket *bucket
	mu     sync.Mutex
	spent  int64 // spool bytes written or reserved
}

func (g *Gateway) newRelay(cfg Relay) (*http.Server, error) {
	if cfg.Spool == nil {
		return nil, errors.New("agent telemetry relay: no spool")
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultRelayMaxBody
	}
	if cfg.Budget <= 0 {
		cfg.Budget = DefaultRelayBudget
	}
	if cfg.Rate <= 0 {
		cfg.Rate = DefaultRelayRate
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultRelayBurst
	}
	rl := &relay{g: g, cfg: cfg, bucket: newBucket(cfg.Rate, cfg.Burst, g.now)}
	return &http.Server{
		Handler:           rl,
		MaxHeaderBytes:    g.limits.MaxHeaderBytes,
		ReadHeaderTimeout: g.limits.ReadHeaderTimeout,
		// A body that trickles in must not hold a slot for long.
		ReadTimeout:                  relayBodyTimeout,
		WriteTimeout:                 relayBodyTimeout,
		IdleTimeout:                  g.limits.ReadHeaderTimeout,
		ErrorLog:                     g.srv.ErrorLog,
		DisableGeneralOptionsHandler: true,
	}, nil
}

// ServeRelay serves the relay of the agent's telemetry on ln until
// [Gateway.Shutdown]; it then returns nil. Without a [Relay] in the
// gateway's options it is an error.
func (g *Gateway) ServeRelay(ln net.Listener) error {
	if g.relaySrv == nil {
		return errors.New("agent telemetry relay: not configured")
	}
	err := g.relaySrv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (rl *relay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rl.g.serveListener(w, r, func(r *http.Request, d *Decision) {
		d.Host, d.Port = relayAddress(r)
		d.Path = loggedPath(truncate(r.URL.EscapedPath(), 1024), r.URL.RawQuery)
	}, rl.serve)
}

// serve judges one relayed request and takes or refuses it.
func (rl *relay) serve(w http.ResponseWriter, r *http.Request, d *Decision) {
	line, sig, json, dn := rl.check(r, d)
	if dn != nil {
		rl.g.refuse(w, d, dn)
		return
	}
	rl.accept(w, d, line, sig, json)
}

// relayAddress is the host and port the request was sent to (the
// gateway's alias and the relay's port, for a well-behaved client).
func relayAddress(r *http.Request) (string, uint16) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	var port uint16
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, p, err := net.SplitHostPort(a.String()); err == nil {
			n, _ := strconv.ParseUint(p, 10, 16)
			port = uint16(n)
		}
	}
	return truncate(host, 255), port
}

// check judges one request, in order of cost: method, path, content
// type and encoding, size, rate, held values in the head, then the
// payload itself (read, decoded, searched). It returns the spool line.
func (rl *relay) check(r *http.Request, d *Decision) ([]byte, otlpwire.Signal, bool, *denial) {
	if r.Method != http.MethodPost {
		return nil, "", false, deny(http.StatusMethodNotAllowed, "agent telemetry relay: method %q is refused: OTLP/HTTP is POST only", truncate(r.Method, 32))
	}
	sig, ok := otlpwire.SignalOf(r.URL.Path)
	if !ok || r.URL.RawQuery != "" {
		return nil, "", false, deny(http.StatusNotFound, "agent telemetry relay: path %q is refused: only /v1/traces, /v1/metrics and /v1/logs (OTLP/HTTP), without a query", truncate(r.URL.EscapedPath(), 128))
	}
	json, dn := relayContentType(r.Header)
	if dn != nil {
		return nil, sig, false, dn
	}
	if r.ContentLength > rl.cfg.MaxBody {
		return nil, sig, json, deny(http.StatusRequestEntityTooLarge, "agent telemetry relay: a payload of %d bytes is refused: at most %d", r.ContentLength, rl.cfg.MaxBody)
	}
	if !rl.bucket.take() {
		return nil, sig, json, deny(http.StatusTooManyRequests, "agent telemetry relay: over %g requests per second (burst %d): refused", rl.cfg.Rate, rl.cfg.Burst)
	}
	if dn := carriedDenial(rl.g.held, r, d); dn != nil {
		return nil, sig, json, dn
	}
	body, dn := rl.readBody(r, d)
	if dn != nil {
		return nil, sig, json, dn
	}
	line, dn := rl.decode(sig, body, json, d)
	return line, sig, json, dn
}

// relayContentType accepts OTLP/HTTP's two encodings, and gzip or no
// content coding; json reports the JSON one.
func relayContentType(h http.Header) (json bool, dn *denial) {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	switch {
	case err == nil && mt == otlpwire.ContentProtobuf:
	case err == nil && mt == otlpwire.ContentJSON:
		json = true
	default:
		return false, deny(http.StatusUnsupportedMediaType, "agent telemetry relay: content type %q is refused: %s or %s (OTLP/HTTP) only", truncate(h.Get("Content-Type"), 64), otlpwire.ContentProtobuf, otlpwire.ContentJSON)
	}
	if ce := strings.ToLower(strings.Join(h.Values("Content-Encoding"), ",")); ce != "" && ce != "gzip" && ce != "identity" {
		return json, deny(http.StatusUnsupportedMediaType, "agent telemetry relay: content encoding %q is refused: gzip or none", truncate(ce, 64))
	}
	return json, nil
}

// readBody reads the payload, undoing gzip, at most MaxBody bytes of it
// either way (a small gzip body can stand for a huge payload).
func (rl *relay) readBody(r *http.Request, d *Decision) ([]byte, *denial) {
	counted := &relayCounter{r: io.LimitReader(r.Body, rl.cfg.MaxBody+1)}
	var src io.Reader = counted
	defer func() { d.BytesUp += counted.n }()
	if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(counted)
		if err != nil {
			return nil, deny(http.StatusBadRequest, "agent telemetry relay: the gzip payload does not read: %v", err)
		}
		defer zr.Close()
		src = zr
	}
	body, err := io.ReadAll(io.LimitReader(src, rl.cfg.MaxBody+1))
	switch {
	case err != nil:
		return nil, deny(http.StatusBadRequest, "agent telemetry relay: reading the payload: %v", err)
	case int64(len(body)) > rl.cfg.MaxBody || counted.n > rl.cfg.MaxBody:
		return nil, deny(http.StatusRequestEntityTooLarge, "agent telemetry relay: the payload is over %d bytes: refused", rl.cfg.MaxBody)
	}
	return body, nil
}

// decode checks the payload is OTLP of the path's signal, re-encodes it
// as the spool's line and searches both forms for held values.
func (rl *relay) decode(sig otlpwire.Signal, body []byte, json bool, d *Decision) ([]byte, *denial) {
	m, err := otlpwire.Decode(sig, body, json)
	if err != nil {
		return nil, deny(http.StatusBadRequest, "agent telemetry relay: %v", err)
	}
	js, err := otlpwire.MarshalJSON(m)
	if err != nil {
		return nil, deny(http.StatusBadRequest, "agent telemetry relay: %v", err)
	}
	if h := rl.g.held; h != nil {
		for _, p := range [][]byte{body, js} {
			if n, at := h.find(p); at >= 0 {
				d.Credential, d.HeldValue = CredentialCarried, heldSeen{where: "OTLP payload", source: n.source, form: n.form}.String()
				return nil, deny(http.StatusForbidden, "agent telemetry relay: the payload carries a held credential value (%s): refused", n.form)
			}
		}
	}
	return spoolLine(RelayLine{Time: d.Time, Signal: sig, CorrelationID: d.CorrelationID, Items: otlpwire.Items(m)}, js), nil
}

// spoolLine is l as one JSON line with otlp as its OTLP field: the
// payload protojson just wrote is valid JSON, and encoding/json would
// only validate and copy it again (a tenth of the relay's time).
func spoolLine(l RelayLine, otlp []byte) []byte {
	head, _ := json.Marshal(struct { // strings, a number and a time always encode
		Time          time.Time       `json:"time"`
		Signal        otlpwire.Signal `json:"signal"`
		CorrelationID string          `json:"correlation_id,omitempty"`
		Items         int             `json:"items"`
	}{l.Time, l.Signal, l.CorrelationID, l.Items})
	line := append(head[:len(head)-1], `,"otlp":`...)
	line = append(line, otlp...)
	return append(line, "}\n"...)
}

// accept records the request and spools its payload, in that order: the
// spool's room is reserved first, and nothing is spooled (so nothing is
// sent on by the host) unless its decision line was written.
func (rl *relay) accept(w http.ResponseWriter, d *Decision, line []byte, sig otlpwire.Signal, json bool) {
	g := rl.g
	if !rl.reserve(int64(len(line))) {
		g.refuse(w, d, deny(http.StatusInsufficientStorage, "agent telemetry relay: the run's %d-byte budget is spent: refused", rl.cfg.Budget))
		return
	}
	ct, answer := response(sig, json)
	d.Decision, d.Rule, d.BytesDown = Allow, RelayRule, int64(len(answer))
	g.record(d)
	if g.full.Load() {
		refuseFull(w)
		return
	}
	if _, err := rl.cfg.Spool.Write(line); err != nil {
		g.logger.Error("writing the agent telemetry spool", "err", err)
		http.Error(w, "mcpsidecar egress gateway: the relay could not keep the payload", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
	w.WriteHeader(http.StatusOK)
	w.Write(answer)
}

// reserve takes n bytes of the spool's budget, if it has them.
func (rl *relay) reserve(n int64) bool {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.spent+n > rl.cfg.Budget {
		return false
	}
	rl.spent += n
	return true
}

// response is what a collector answers: the empty Export*ServiceResponse
// in the request's encoding, and its content type.
func response(sig otlpwire.Signal, json bool) (string, []byte) {
	if json {
		return otlpwire.ContentJSON, []byte("{}")
	}
	b, _ := proto.Marshal(otlpwire.NewResponse(sig)) // an empty message always encodes
	return otlpwire.ContentProtobuf, b
}

// relayCounter counts the payload bytes read off the wire.
type relayCounter struct {
	r io.Reader
	n int64
}

func (c *relayCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// bucket is a token bucket: rate tokens a second, at most burst held.
type bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time
}

func newBucket(rate float64, burst int, now func() time.Time) *bucket {
	return &bucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: now(), now: now}
}

func (b *bucket) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.now()
	b.tokens = min(b.burst, b.tokens+t.Sub(b.last).Seconds()*b.rate)
	b.last = t
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
