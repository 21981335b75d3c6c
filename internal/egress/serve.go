package egress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// ServeConfig is what the gateway role needs to start.
type ServeConfig struct {
	Listen           string // host:port of the proxy
	CredentialListen string // host:port of the credential listener; "": none
	// RelayListen is host:port of the agent's telemetry relay; "": none.
	// Its spool is [runs.FileAgentTelemetry] beside the decision log (or
	// Out, when the lines go there).
	RelayListen string
	// DecisionLog is the file decision lines are appended to; "" writes
	// them to Out.
	DecisionLog string
	Out         io.Writer
	Logger      *slog.Logger // operational messages; nil: discarded
	Policy      *netpolicy.Policy
	Injection   *Injection // the credentials held; required with CredentialListen
	Scopes      *Scoper    // nil: no declared MCP servers
	RunID       string
	Limits      Limits
	// ShutdownWait bounds how long shutdown waits for the forwarded
	// requests it cancelled to return (0: [DefaultShutdownWait]).
	ShutdownWait time.Duration
	// LogBudget, when positive, lowers the decision log's byte budget
	// ([DefaultLogBudget]); only the test builds set it, so that an
	// end-to-end test fills the log in a few requests.
	LogBudget int64
}

// listen is net.Listen; the tests that check the start order replace it.
var listen = net.Listen

// Serve runs the gateway role in its security-critical order: open the
// decision log, listen on the proxy port and the credential port, then
// call harden, and only then build the gateway and serve, until ctx is
// cancelled; shutdown closes every tunnel, writes the last decision lines
// and syncs the log. harden installs the in-process restrictions, which
// forbid opening a file or binding a port afterwards; the threat it
// answers is a request served with the container's full rights. A harden
// error is returned as it is, and nothing is served.
func Serve(ctx context.Context, cfg ServeConfig, harden func() error) error {
	if harden == nil {
		return errors.New("gateway: no harden hook")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dlog := NewDecisionLog(cfg.Out)
	if cfg.DecisionLog != "" {
		var err error
		if dlog, err = OpenDecisionLog(cfg.DecisionLog); err != nil {
			return err
		}
	}
	defer dlog.Close()
	counts, err := openCounts(cfg.DecisionLog)
	if err != nil {
		return err
	}
	defer counts.Close()
	if cfg.LogBudget > 0 {
		dlog.SetBudget(cfg.LogBudget)
	}
	ln, err := listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	defer ln.Close()
	var credLn net.Listener
	if cfg.CredentialListen != "" {
		if credLn, err = listen("tcp", cfg.CredentialListen); err != nil {
			return fmt.Errorf("listening on %s: %w", cfg.CredentialListen, err)
		}
		defer credLn.Close()
	}
	relayLn, relayCfg, err := openRelay(cfg)
	if err != nil {
		return err
	}
	if relayLn != nil {
		defer relayLn.Close()
		if f, ok := relayCfg.Spool.(*os.File); ok && cfg.DecisionLog != "" {
			defer f.Close()
		}
	}
	if err := harden(); err != nil {
		return err
	}
	g, err := New(Options{Policy: cfg.Policy, Log: dlog, RunID: cfg.RunID, Logger: logger, Injection: cfg.Injection,
		Scopes: cfg.Scopes, Limits: cfg.Limits, Relay: relayCfg})
	if err != nil {
		return err
	}
	if relayLn != nil {
		logger.Info("agent telemetry relay", "addr", relayLn.Addr().String())
		go func() {
			if err := g.ServeRelay(relayLn); err != nil {
				logger.Error("serving the agent telemetry relay", "err", err)
			}
		}()
	}
	logger.Info("gateway listening", "addr", ln.Addr().String(), "run_id", cfg.RunID)
	if credLn != nil {
		logger.Info("credential listener", "addr", credLn.Addr().String(), "credentials", len(cfg.Injection.Credentials))
		go func() {
			if err := g.ServeCredentials(credLn); err != nil {
				logger.Error("serving the credential listener", "err", err)
			}
		}()
	}
	err = serveUntil(ctx, g, ln, cfg.ShutdownWait, dlog)
	return errors.Join(err, writeCounts(counts, g.Counts(), logger))
}

// openRelay opens the relay's spool and listens on its port, before the
// role hardens (nothing can be opened or bound after); nil without
// cfg.RelayListen.
func openRelay(cfg ServeConfig) (net.Listener, *Relay, error) {
	if cfg.RelayListen == "" {
		return nil, nil, nil
	}
	var spool io.Writer = cfg.Out
	if cfg.DecisionLog != "" {
		path := filepath.Join(filepath.Dir(cfg.DecisionLog), runs.FileAgentTelemetry)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|runs.NoFollow, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("opening the agent telemetry spool: %w", err)
		}
		spool = f
	}
	ln, err := listen("tcp", cfg.RelayListen)
	if err != nil {
		if f, ok := spool.(*os.File); ok && cfg.DecisionLog != "" {
			f.Close()
		}
		return nil, nil, fmt.Errorf("listening on %s: %w", cfg.RelayListen, err)
	}
	return ln, &Relay{Spool: spool}, nil
}

// openCounts creates the counts file beside the decision log
// ([runs.FileEgressCounts]), before the role hardens (nothing can be
// opened after); nil when the lines go to standard output.
func openCounts(decisionLog string) (*os.File, error) {
	if decisionLog == "" {
		return nil, nil
	}
	path := filepath.Join(filepath.Dir(decisionLog), runs.FileEgressCounts)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|runs.NoFollow, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the counts file: %w", err)
	}
	return f, nil
}

// writeCounts reports the gateway's own account of its record at exit:
// on its log, and into the counts file that the verdict joins with the
// decision log. A request accepted with no line written is an error of
// the role. The file is written only here, at a clean exit: a gateway
// killed before has an empty one, and the verdict cannot show its record
// complete.
func writeCounts(f *os.File, c Counts, logger *slog.Logger) error {
	logger.Info("decision log closed", "accepted", c.Accepted, "recorded", c.Recorded)
	var err error
	if c.Accepted != c.Recorded {
		err = fmt.Errorf("decision log incomplete: %d requests accepted, %d lines written", c.Accepted, c.Recorded)
	}
	if f == nil {
		return err
	}
	b, _ := json.Marshal(c)
	if _, werr := f.Write(append(b, '\n')); werr != nil {
		return errors.Join(err, fmt.Errorf("writing the counts file: %w", werr))
	}
	return errors.Join(err, f.Sync())
}

// serveUntil serves until ctx is cancelled (a signal), then shuts down:
// tunnels closed, decision lines written, the log synced. It returns the
// log's [ErrLogFull] when the log filled.
func serveUntil(ctx context.Context, g *Gateway, ln net.Listener, wait time.Duration, dlog *DecisionLog) error {
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving gateway: %w", err)
	case <-ctx.Done():
	}
	if wait <= 0 {
		wait = DefaultShutdownWait
	}
	sctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err := g.Shutdown(sctx)
	<-errc
	// A full log ends the role with an error: its record stops early, and
	// the role's own exit says so besides the log's last line.
	return errors.Join(err, dlog.Full(), dlog.Close())
}
