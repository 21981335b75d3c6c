package otelexport

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"
	"sync"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/mcpsidecar/mcpsidecar/internal/otlpwire"
)

// grpcConns are the connections relayed metrics and logs go over with
// OTLP/gRPC, by endpoint (the signals' endpoints may differ), made on
// first use.
type grpcConns struct {
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// sendGRPC sends metrics or logs m to the collector's OTLP gRPC service
// of signal sig (opentelemetry.proto.collector.*.v1), with the headers
// OTEL_EXPORTER_OTLP_HEADERS names as metadata. A collector that takes
// part of it says so in its answer's partial_success: an error.
func (fw *forwarder) sendGRPC(ctx context.Context, sig otlpwire.Signal, m proto.Message) error {
	endpoint, err := grpcEndpoint(fw.t, sig, fw.getenv)
	if err != nil {
		return err
	}
	cc, err := fw.grpc.conn(endpoint)
	if err != nil {
		return fmt.Errorf("sending %s: %w", sig, err)
	}
	if h := headers(fw.getenv, sig); len(h) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, metadata.New(h))
	}
	var rejected int64
	var msg string
	switch r := m.(type) {
	case *colmetrics.ExportMetricsServiceRequest:
		var resp *colmetrics.ExportMetricsServiceResponse
		if resp, err = colmetrics.NewMetricsServiceClient(cc).Export(ctx, r); err == nil && resp.GetPartialSuccess() != nil {
			rejected, msg = resp.GetPartialSuccess().GetRejectedDataPoints(), resp.GetPartialSuccess().GetErrorMessage()
		}
	case *collogs.ExportLogsServiceRequest:
		var resp *collogs.ExportLogsServiceResponse
		if resp, err = collogs.NewLogsServiceClient(cc).Export(ctx, r); err == nil && resp.GetPartialSuccess() != nil {
			rejected, msg = resp.GetPartialSuccess().GetRejectedLogRecords(), resp.GetPartialSuccess().GetErrorMessage()
		}
	default:
		return fmt.Errorf("sending %s over gRPC: not metrics or logs", sig)
	}
	if err != nil {
		return fmt.Errorf("sending %s: %w", sig, err)
	}
	if rejected > 0 {
		return fmt.Errorf("sending %s: the collector rejected %d of them: %s", sig, rejected, msg)
	}
	return nil
}

// grpcEndpoint is the collector URL signal sig goes to over gRPC: the
// endpoint given, or the signal's own variable, or the base variable.
func grpcEndpoint(t Target, sig otlpwire.Signal, getenv func(string) string) (string, error) {
	endpoint := t.Endpoint
	for _, k := range []string{"OTEL_EXPORTER_OTLP_" + strings.ToUpper(string(sig)) + "_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if endpoint == "" {
			endpoint = getenv(k)
		}
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("OTLP gRPC endpoint %q: want a URL such as http://localhost:4317", endpoint)
	}
	return u.Scheme + "://" + u.Host, nil
}

// conn is the connection to endpoint (http:// in the clear, https://
// with TLS verified against the system's roots), made once.
func (g *grpcConns) conn(endpoint string) (*grpc.ClientConn, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if cc := g.conns[endpoint]; cc != nil {
		return cc, nil
	}
	u, _ := url.Parse(endpoint) // checked by grpcEndpoint
	creds := insecure.NewCredentials()
	if u.Scheme == "https" {
		creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	}
	cc, err := grpc.NewClient(u.Host, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", endpoint, err)
	}
	if g.conns == nil {
		g.conns = map[string]*grpc.ClientConn{}
	}
	g.conns[endpoint] = cc
	return cc, nil
}

func (g *grpcConns) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, cc := range g.conns {
		cc.Close()
		delete(g.conns, k)
	}
}
