package sidecar

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
)

// ServeConfig is what the sidecar role needs to start: the sidecar's
// [Config] (its Audit field is filled by [Serve] from AuditLog) plus
// where it listens and writes.
type ServeConfig struct {
	Config
	// Addr is the host:port to listen on.
	Addr string
	// AuditLog is the file the audit log is appended to; "" means calls
	// are not audited (said once, as a warning, in the log).
	AuditLog string
	// GCPercent is the collector setting in force ([TuneGC]), for the log.
	GCPercent int
}

// ConfigError is a configuration [New] refused: the caller's input was
// wrong, not the machine.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Seams of the start order, replaced by the tests that check it.
var (
	listen          = net.Listen
	preloadTLSRoots = func() { _, _ = x509.SystemCertPool() }
)

// Serve runs the sidecar role in its security-critical order: open the
// audit log, build the sidecar, listen, load the system TLS roots, then
// call harden, and only then serve, until ctx is cancelled. harden
// installs the in-process restrictions (Landlock, seccomp): everything
// that needs a path or a new socket is done before it, and nothing is
// served before it returns. The threat: a request served before hardening
// runs with the container's full rights, and the roots, which Go reads
// lazily, would otherwise need read access to /etc/ssl after Landlock.
// A harden error is returned as it is, and nothing is served.
func Serve(ctx context.Context, cfg ServeConfig, harden func() error) error {
	if harden == nil {
		return fmt.Errorf("sidecar: no harden hook")
	}
	log := orDefault(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.AuditLog != "" {
		audit, err := OpenAuditLog(cfg.AuditLog)
		if err != nil {
			return err
		}
		cfg.Audit = audit
	} else {
		log.Warn("no --audit-log given: tool calls are not audited")
	}
	sc, err := New(cfg.Config)
	if err != nil {
		_ = cfg.Audit.Close()
		return &ConfigError{Err: err}
	}
	ln, err := listen("tcp", cfg.Addr)
	if err != nil {
		_ = cfg.Audit.Close()
		return fmt.Errorf("listening on %s: %w", cfg.Addr, err)
	}
	preloadTLSRoots()
	if err := harden(); err != nil {
		_ = ln.Close()
		_ = cfg.Audit.Close()
		return err
	}
	log.Info("sidecar listening", "addr", ln.Addr().String(), "mcp", MCPPath, "health", HealthPath, "upstream", cfg.UpstreamURL, "no_upstream", cfg.NoUpstream, "gc_percent", cfg.GCPercent)
	return sc.Serve(ctx, ln)
}
