package otelexport

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"

	"github.com/mcpsidecar/mcpsidecar/internal/otlpwire"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Protocols of OTLP export (OTEL_EXPORTER_OTLP_PROTOCOL's values).
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Target is where a run's spans go: an OTLP endpoint, or a file of OTLP
// JSON.
type Target struct {
	// Endpoint is the collector's URL (http://host:4318 for
	// http/protobuf, whose path defaults to /v1/traces;
	// http://host:4317 for grpc; https:// for TLS). Empty: the standard
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT,
	// read by the exporter itself.
	Endpoint string
	// Protocol is [ProtocolHTTP] or [ProtocolGRPC]; empty: the standard
	// variables', else http/protobuf.
	Protocol string
	// File, when set, receives OTLP JSON (one TracesData a line) instead.
	File string
}

// Configured reports whether the environment names a collector: the
// standard variables an OpenTelemetry SDK reads.
func Configured(getenv func(string) string) bool {
	return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// NewExporter builds t's exporter. A malformed endpoint or an unknown
// protocol is an error that says which.
func NewExporter(ctx context.Context, t Target, getenv func(string) string) (sdktrace.SpanExporter, error) {
	if t.File != "" {
		return otlptrace.New(ctx, &fileClient{path: t.File})
	}
	proto := t.Protocol
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if proto == "" {
			proto = getenv(k)
		}
	}
	if proto == "" {
		proto = ProtocolHTTP
	}
	if t.Endpoint != "" {
		u, err := url.Parse(t.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("OTLP endpoint %q: want a URL such as http://localhost:4318 (http/protobuf) or http://localhost:4317 (grpc)", t.Endpoint)
		}
	} else if !Configured(getenv) {
		return nil, errors.New("no OTLP endpoint: give one, or set OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	switch proto {
	case ProtocolHTTP:
		var opts []otlptracehttp.Option
		if t.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(tracesURL(t.Endpoint)))
		}
		return otlptracehttp.New(ctx, opts...)
	case ProtocolGRPC:
		var opts []otlptracegrpc.Option
		if t.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(t.Endpoint))
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	return nil, fmt.Errorf("OTLP protocol %q: want %s or %s", proto, ProtocolHTTP, ProtocolGRPC)
}

// fileClient writes each upload as one line of OTLP JSON (the OTLP file
// exporter's format: trace and span ids in hex, enums as numbers;
// otlpwire.MarshalJSON), to a file it creates (never through a link).
type fileClient struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

func (c *fileClient) Start(context.Context) error {
	f, err := os.OpenFile(c.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|runs.NoFollow, 0o600)
	if err != nil {
		return fmt.Errorf("opening the OTLP file: %w", err)
	}
	c.f = f
	return nil
}

func (c *fileClient) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	return c.write(&tracepb.TracesData{ResourceSpans: rs})
}

// write appends m (a TracesData, MetricsData or LogsData) as one line of
// OTLP JSON.
func (c *fileClient) write(m proto.Message) error {
	b, err := otlpwire.MarshalJSON(m)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return errors.New("writing the OTLP file: not open")
	}
	_, err = c.f.Write(append(b, '\n'))
	return err
}

func (c *fileClient) Stop(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return nil
	}
	err := errors.Join(c.f.Sync(), c.f.Close())
	c.f = nil
	return err
}

// tracesURL is endpoint with the traces path when it names none: as the
// base OTEL_EXPORTER_OTLP_ENDPOINT, http://host:4318 means
// http://host:4318/v1/traces (the exporter takes a URL option as the
// full URL).
func tracesURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return endpoint
	}
	u.Path = "/v1/traces"
	return u.String()
}
