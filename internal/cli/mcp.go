package cli

import (
	"context"
	"errors"
	"fmt"

	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/mcppin"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// mcpPinOptions are the flags of `mcp pin`.
type mcpPinOptions struct {
	specPath  string
	trustSpec bool // --trust-spec (spec_gate.go)
	update    bool
	timeout   time.Duration
	// getenv reads the host variables credentials come from (os.Getenv).
	getenv func(string) string
	// transport replaces the HTTP transport (tests dial loopback fakes).
	transport http.RoundTripper
}

func newMCPCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Pin the tool definitions of the spec's MCP servers",
		Long: `The spec's [[mcp_servers]] (or the built-in Microsoft Learn server) are pinned in a
lock file beside the spec (sandbox_spec.toml -> sandbox_spec.mcp-lock.json): each exposed
tool's name, description and input schema, with a hash of each. At each connect the
sidecar compares the server's tools with the pin; a changed, added or removed tool
refuses the server (on_drift = "fail") or is allowed with a warning (on_drift = "warn").`,
	}
	cmd.AddCommand(newMCPPinCmd(s))
	return cmd
}

func newMCPPinCmd(s Streams) *cobra.Command {
	o := mcpPinOptions{getenv: os.Getenv}
	cmd := &cobra.Command{
		Use:   "pin [FILE]",
		Short: "Record each MCP server's tool definitions in the lock file (--update accepts a change)",
		Long: `Connect to each MCP server the spec declares, from this host (HTTP(S)_PROXY honoured),
list its tools and record them in the lock file beside the spec. A credential the spec
declares for a server's host is read from its host variable and sent to that host only,
so a ./sandbox_spec.toml found here that softens the sandbox must be trusted first, as
for run (exit 6; see spec trust --help).

Without a lock entry for a server, its tools are recorded. With one, the tools are
compared: when they differ, the difference is shown and nothing is written (exit 1)
unless --update accepts it.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if o.specPath != "" && o.specPath != args[0] {
					return usageErrorf("two specs named: %s and --spec %s; name one", args[0], o.specPath)
				}
				o.specPath = args[0]
			}
			return runMCPPin(cmd.Context(), s, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.specPath, "spec", "", specFlagHelp)
	f.BoolVar(&o.trustSpec, "trust-spec", false, trustFlagHelp)
	f.BoolVar(&o.update, "update", false, "accept changed definitions and rewrite the lock")
	f.DurationVar(&o.timeout, "timeout", sidecar.DefaultUpstreamTimeout, "timeout of each server's connect and tool list")
	return cmd
}

// errDrift is the error of `mcp pin` when definitions changed and
// --update was not given.
var errDrift = errors.New("tool definitions differ from the lock (shown above); review them and accept with `mcpsidecar mcp pin --update`")

func runMCPPin(ctx context.Context, s Streams, o mcpPinOptions) error {
	// The gate (spec_gate.go): pin reads the spec's credentials from this
	// host and sends them to its servers, so a ./sandbox_spec.toml nobody
	// named needs trust here as much as in a run.
	c, err := gateSpec(s.Err, specGate{flag: o.specPath, trustFlag: o.trustSpec, envHash: o.getenv(envTrustSpec)})
	if err != nil {
		return err
	}
	if c.err != nil {
		return c.err
	}
	sp, name := c.spec, c.name
	servers := sp.Servers()
	if len(servers) == 0 {
		return usageErrorf("spec %s has no MCP servers (it needs the mcp_client capability)", name)
	}
	lockPath := lockPathFor(name)
	lock, err := mcppin.Load(lockPath)
	if err != nil {
		return err
	}
	next := &mcppin.Lock{Schema: mcppin.Schema}
	if lock != nil {
		next.Servers = append(next.Servers, lock.Servers...)
	}
	drift := false
	for _, m := range servers {
		got, err := sidecar.ObservePin(ctx, sidecar.ServerConfig{Name: m.Name, URL: m.URL, Tools: m.Tools}, sidecar.ObserveOptions{
			Header: credentialHeader(sp, m, o.getenv), Timeout: o.timeout, Proxy: http.ProxyFromEnvironment, Transport: o.transport})
		if err != nil {
			return err
		}
		old, pinned := lock.Server(m.Name)
		changes := mcppin.Compare(old, got)
		switch {
		case !pinned:
			fmt.Fprintf(s.Out, "server %s: pinned %d tools\n", m.Name, len(got.Tools))
		case len(changes) == 0 && old.URL == got.URL:
			fmt.Fprintf(s.Out, "server %s: %d tools match the lock\n", m.Name, len(got.Tools))
			continue
		default:
			drift = true
			fmt.Fprint(s.Out, mcppin.Diff(changes))
			if old.URL != got.URL {
				fmt.Fprintf(s.Out, "server %s: url changed from %s to %s\n", m.Name, old.URL, got.URL)
			}
		}
		next.Put(got)
	}
	if drift && !o.update {
		return errDrift
	}
	if err := next.Save(lockPath); err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "lock written: %s\n", lockPath)
	return nil
}

// lockPathFor is the lock beside the spec; the built-in spec's is in the
// working directory, beside where ./sandbox_spec.toml would be.
func lockPathFor(specName string) string {
	if specName == builtinSpecName {
		return mcppin.LockPath(workdirSpec)
	}
	return mcppin.LockPath(specName)
}

// credentialHeader is the spec's credential for m's host, read from its
// host variable, as a header; nil when there is none (or it is unset).
func credentialHeader(sp *spec.Spec, m spec.MCPServer, getenv func(string) string) http.Header {
	for _, c := range sp.Credentials {
		if c.Host != m.Host() {
			continue
		}
		v := getenv(c.FromHost)
		if v == "" {
			return nil
		}
		return http.Header{c.Header: {strings.ReplaceAll(c.Format, spec.ValueToken, v)}}
	}
	return nil
}
