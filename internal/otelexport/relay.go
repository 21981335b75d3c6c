package otelexport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/otlpwire"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// RelayStats is what [ForwardAgentTelemetry] did with the agent's own
// telemetry that the gateway relayed.
type RelayStats struct {
	// Requests is how many the record holds, every one counted even
	// when the bound ran out before they were tried; Sent, how many the
	// collector took; Items, the spans, metrics and log records of those.
	// Live is how many were sent during the run ([LiveRelay]) and not
	// again (not in Sent). Requests - Sent - Live were not delivered:
	// refused, failed, or never tried once the bound ran out.
	Requests, Sent, Items, Live int
}

// Unsent is how many requests of the record the collector did not take.
func (s RelayStats) Unsent() int { return s.Requests - s.Sent - s.Live }

// maxRelayLine bounds one line of the spool as read back: a payload of
// at most egress.DefaultRelayMaxBody bytes, as OTLP/JSON.
const maxRelayLine = 16 * egress.DefaultRelayMaxBody

// ForwardAgentTelemetry sends the agent's own telemetry, which the
// gateway relayed into the run directory (runs.FileAgentTelemetry,
// collected and redacted like every artifact), to the collector t names
// (or, with t.File, writes it as OTLP/JSON):
// traces through the OpenTelemetry SDK's OTLP client (HTTP or gRPC, and
// the OTEL_EXPORTER_OTLP_* variables it reads), metrics and logs over
// OTLP/HTTP protobuf with OTEL_EXPORTER_OTLP_HEADERS. ctx bounds it all: a
// collector that never answers costs at most ctx's time. A run without
// the file sends nothing and is no error. skip (nil: none) names the
// lines the collector took during the run ([LiveRelay.Finish]), which are
// not sent again.
func ForwardAgentTelemetry(ctx context.Context, runDir string, t Target, getenv func(string) string, skip func(line int) bool) (RelayStats, error) {
	var st RelayStats
	f, err := os.OpenFile(filepath.Join(runDir, runs.FileAgentTelemetry), os.O_RDONLY|runs.NoFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("opening %s: %w", runs.FileAgentTelemetry, err)
	}
	defer f.Close()
	// A forwarder that cannot start (the bound spent by the run's own
	// export) sends nothing, but every request is still counted, and
	// those sent during the run (red team, session 39: "0 of the 0" for
	// a spool of 30, 6 of them taken live).
	fw, fwErr := newForwarder(ctx, t, getenv)
	if fwErr == nil {
		defer fw.stop(context.WithoutCancel(ctx))
	}
	sc := bufio.NewScanner(io.LimitReader(f, runs.MaxCopyBytes))
	sc.Buffer(make([]byte, 64<<10), maxRelayLine)
	var fails sendFailures
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		st.Requests++
		switch {
		case skip != nil && skip(n):
			st.Live++
			st.Items += itemsOf(sc.Bytes())
		case fwErr != nil || ctx.Err() != nil:
			fails.untried++ // counted, not tried: the bound ran out
		default:
			items, err := fw.send(ctx, sc.Bytes())
			if err != nil {
				fails.add(n, err)
				continue
			}
			st.Sent++
			st.Items += items
		}
	}
	var errs []error
	if fwErr != nil {
		fails.cause = fwErr
	}
	if err := fails.err(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("reading %s: %w", runs.FileAgentTelemetry, err))
	}
	return st, errors.Join(errs...)
}

// sendFailures sums up the requests the collector did not take, in one
// error: the first failure with its line, how many others failed, and how
// many were not tried once the bound ran out (a collector that refuses
// each of 1,000 requests is one line of warning, not 1,000).
type sendFailures struct {
	first   error
	failed  int // sends that failed, the first included
	untried int
	cause   error // why none was tried (the forwarder did not start); nil: the bound
}

func (f *sendFailures) add(line int, err error) {
	if f.first == nil {
		f.first = fmt.Errorf("%s line %d: %w", runs.FileAgentTelemetry, line, err)
	}
	f.failed++
}

func (f *sendFailures) err(ctx context.Context) error {
	if f.failed == 0 && f.untried == 0 {
		return nil
	}
	var more []string
	if f.failed > 1 {
		more = append(more, fmt.Sprintf("%d more failed", f.failed-1))
	}
	if f.untried > 0 {
		why := context.Cause(ctx)
		if f.cause != nil {
			why = f.cause
		}
		more = append(more, fmt.Sprintf("%d not tried: %v", f.untried, why))
	}
	first := f.first
	if first == nil {
		return errors.New(strings.Join(more, "; "))
	}
	if len(more) > 0 {
		return fmt.Errorf("%w (%s)", first, strings.Join(more, "; "))
	}
	return first
}

// itemsOf is the item count the gateway wrote on a spool line (0 when it
// does not read).
func itemsOf(line []byte) int {
	var rl struct {
		Items int `json:"items"`
	}
	json.Unmarshal(line, &rl)
	return rl.Items
}

// forwarder sends one spool line at a time.
type forwarder struct {
	t      Target
	proto  string
	getenv func(string) string
	traces otlptrace.Client
	hc     *http.Client
	file   *fileClient // with t.File: metrics and logs are written here too
	grpc   grpcConns   // with gRPC: metrics' and logs' connections (relay_grpc.go)
}

func newForwarder(ctx context.Context, t Target, getenv func(string) string) (*forwarder, error) {
	fw := &forwarder{t: t, proto: protocol(t, getenv), getenv: getenv, hc: &http.Client{}}
	switch {
	case t.File != "":
		fw.file = &fileClient{path: AgentFile(t.File)}
		fw.traces = fw.file
	case fw.proto == ProtocolGRPC:
		var opts []otlptracegrpc.Option
		if t.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(t.Endpoint))
		}
		fw.traces = otlptracegrpc.NewClient(opts...)
	default:
		var opts []otlptracehttp.Option
		if t.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(tracesURL(t.Endpoint)))
		}
		fw.traces = otlptracehttp.NewClient(opts...)
	}
	if err := fw.traces.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting the OTLP client: %w", err)
	}
	return fw, nil
}

// stop ends the clients' connections.
func (fw *forwarder) stop(ctx context.Context) {
	fw.traces.Stop(ctx)
	fw.grpc.close()
}

// AgentFile is where, with --otlp-file FILE, the agent's relayed
// telemetry is written: FILE.agent, one TracesData, MetricsData or
// LogsData a line, as OTLP/JSON.
func AgentFile(file string) string { return file + ".agent" }

// protocol is t's OTLP protocol, or the standard variables', else
// http/protobuf (as [NewExporter]).
func protocol(t Target, getenv func(string) string) string {
	if t.Protocol != "" {
		return t.Protocol
	}
	if v := getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); v != "" {
		return v
	}
	return ProtocolHTTP
}

// send sends one spool line; it returns the items sent.
func (fw *forwarder) send(ctx context.Context, line []byte) (int, error) {
	var rl egress.RelayLine
	if err := json.Unmarshal(line, &rl); err != nil {
		return 0, fmt.Errorf("not a relay line: %w", err)
	}
	m, err := otlpwire.Decode(rl.Signal, rl.OTLP, true)
	if err != nil {
		return 0, err
	}
	items := otlpwire.Items(m)
	if tr, ok := m.(*coltrace.ExportTraceServiceRequest); ok {
		if err := fw.traces.UploadTraces(ctx, tr.ResourceSpans); err != nil {
			return 0, fmt.Errorf("sending traces: %w", err)
		}
		return items, nil
	}
	switch {
	case fw.file != nil:
		err = fw.file.write(otlpwire.Data(m))
	case fw.proto == ProtocolGRPC:
		err = fw.sendGRPC(ctx, rl.Signal, m)
	default:
		err = fw.post(ctx, rl.Signal, m)
	}
	if err != nil {
		return 0, err
	}
	return items, nil
}

// post sends m to the signal's OTLP/HTTP endpoint.
func (fw *forwarder) post(ctx context.Context, sig otlpwire.Signal, m proto.Message) error {
	u, err := signalURL(fw.t, sig, fw.getenv)
	if err != nil {
		return err
	}
	body, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", sig, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("sending %s: %w", sig, err)
	}
	req.Header.Set("Content-Type", otlpwire.ContentProtobuf)
	for k, v := range headers(fw.getenv, sig) {
		req.Header.Set(k, v)
	}
	resp, err := fw.hc.Do(req)
	if err != nil {
		return fmt.Errorf("sending %s: %w", sig, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("sending %s: the collector answered %s", sig, resp.Status)
	}
	return nil
}

// signalURL is where signal sig goes: the endpoint given (its path, if
// it names the traces', replaced by the signal's), or the signal's own
// variable, or the base variable plus the signal's path.
func signalURL(t Target, sig otlpwire.Signal, getenv func(string) string) (string, error) {
	env := "OTEL_EXPORTER_OTLP_" + strings.ToUpper(string(sig)) + "_ENDPOINT"
	base := t.Endpoint
	if base == "" {
		if v := getenv(env); v != "" {
			return v, nil
		}
		base = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("OTLP endpoint %q: want a URL such as http://localhost:4318", base)
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), otlpwire.Traces.Path()) + sig.Path()
	return u.String(), nil
}

// headers are OTEL_EXPORTER_OTLP_HEADERS, then the signal's own
// (key=value pairs, comma-separated, values percent-decoded).
func headers(getenv func(string) string, sig otlpwire.Signal) map[string]string {
	out := map[string]string{}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_" + strings.ToUpper(string(sig)) + "_HEADERS"} {
		for _, kv := range strings.Split(getenv(k), ",") {
			name, v, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(name) == "" {
				continue
			}
			if d, err := url.PathUnescape(strings.TrimSpace(v)); err == nil {
				v = d
			}
			out[strings.TrimSpace(name)] = v
		}
	}
	return out
}
