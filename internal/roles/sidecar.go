//go:build linux

package roles

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learn"
)

// sidecarOptions are the sidecar command's flags.
type sidecarOptions struct {
	host            string
	port            int
	auditLog        string
	upstreamURL     string
	upstreamTimeout time.Duration
	maxSessions     int
	maxBodyBytes    int64
	noUpstream      bool
	pinsOut         string
}

// sidecarLong is the sidecar's help.
const sidecarLong = `Serve the MCP sidecar: the local tool get_html_element_name, the resource
mcp-sidecar://instructions/answer-format.md, and proxy tools for the Microsoft Learn
MCP server (microsoft_docs_search, microsoft_docs_fetch, microsoft_code_sample_search).
Every tools/call and resources/read is one line in the --audit-log file.

With --no-upstream (doctor and test-sandbox runs) the proxy tools stay listed but
every call fails with a tool error and nothing contacts the upstream, not even a
DNS lookup through the gateway.

Upstream requests honour HTTP_PROXY, HTTPS_PROXY and NO_PROXY, read once at start.
The garbage collector runs at GOGC=400 (a small-heap server; see docs/PERFORMANCE.md)
unless GOGC is set.
SIGTERM or SIGINT shuts down gracefully: in-flight calls finish or time out, and the
audit log is synced before the process exits.`

func sidecarCmd(ctx context.Context, args []string, s Streams) error {
	var o sidecarOptions
	f := newFlags("sidecar [flags]", sidecarLong, s)
	f.StringVar(&o.host, "host", "0.0.0.0", "address to listen on")
	f.IntVar(&o.port, "port", sidecar.DefaultPort, "TCP port to listen on")
	f.StringVar(&o.auditLog, "audit-log", "", "append the audit log (JSON lines) to this file; without it calls are not audited")
	f.StringVar(&o.upstreamURL, "upstream-url", learn.DefaultEndpoint, "Microsoft Learn MCP endpoint to proxy")
	f.DurationVar(&o.upstreamTimeout, "upstream-timeout", sidecar.DefaultUpstreamTimeout, "timeout of one upstream call")
	f.IntVar(&o.maxSessions, "max-sessions", sidecar.DefaultMaxSessions, "maximum concurrent client connections")
	f.BoolVar(&o.noUpstream, "no-upstream", false, "offline mode (doctor/test-sandbox): list the Learn tools but never contact the upstream; their calls fail")
	f.Int64Var(&o.maxBodyBytes, "max-body-bytes", sidecar.DefaultMaxBodyBytes, "maximum size of one request body")
	f.StringVar(&o.pinsOut, "pins-out", "", "save the declared MCP servers' tool definitions, as observed, to this file (declared servers only)")
	if err := f.noArgs(args); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	return runSidecar(ctx, s, o)
}

func (o sidecarOptions) validate() error {
	switch {
	case o.port < 1 || o.port > 65535:
		return usageErrorf("--port %d: want 1-65535", o.port)
	case o.upstreamTimeout <= 0:
		return usageErrorf("--upstream-timeout %s: want a positive duration", o.upstreamTimeout)
	case o.maxSessions < 1:
		return usageErrorf("--max-sessions %d: want at least 1", o.maxSessions)
	case o.maxBodyBytes < 1024:
		return usageErrorf("--max-body-bytes %d: want at least 1024", o.maxBodyBytes)
	}
	return nil
}

func runSidecar(ctx context.Context, s Streams, o sidecarOptions) error {
	servers, err := sidecarServers(os.Getenv) // mcp_roles.go: the spec's [[mcp_servers]]
	if err != nil {
		return err
	}
	cfg := sidecar.ServeConfig{Config: sidecar.Config{
		UpstreamURL:     o.upstreamURL,
		UpstreamTimeout: o.upstreamTimeout,
		MaxSessions:     o.maxSessions,
		MaxBodyBytes:    o.maxBodyBytes,
		Proxy:           sidecar.ProxyFromEnv(os.Getenv),
		Logger:          slog.New(slog.NewJSONHandler(s.Err, nil)),
		NoUpstream:      o.noUpstream,
		PinsOut:         o.pinsOut,
		Servers:         servers,
	}, Addr: net.JoinHostPort(o.host, strconv.Itoa(o.port)), AuditLog: o.auditLog, GCPercent: sidecar.TuneGC(os.Getenv)}
	// Without $MCPSIDECAR_HARDEN_POLICY (host use) hardening is a no-op.
	err = sidecar.Serve(ctx, cfg, func() error {
		return hardenRole(ctx, "sidecar", os.Getenv, s.Err, false, auditDir(o.auditLog))
	})
	if ce := (*sidecar.ConfigError)(nil); errors.As(err, &ce) {
		return usageErrorf("%v", err)
	}
	return err
}

// auditDir is where the harden report goes: next to the audit log, in the
// sidecar's own output directory ("" skips the report).
func auditDir(auditLog string) string {
	if auditLog == "" {
		return ""
	}
	return filepath.Dir(auditLog)
}
