package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/mcppin"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// The MCP stage of the lifecycle: what a spec's declared MCP servers
// ([[mcp_servers]]) add to a run. In the run-dir phase, before the plan is
// built (mcpPlan): the Squid gateway engine is refused, the sidecar gets
// the pins of the lock beside the spec and the run's credential
// placeholder. After the run (pinFirstRun): the definitions the sidecar
// observed of the servers the lock did not pin yet are written to the lock
// (trust on first use, said as such). Threat: an MCP server that changes
// a tool's description or schema between runs to steer the agent; the
// pins let the sidecar refuse it (internal/mcppin).

// errSquidMCP is the refusal of the Squid engine with declared servers.
var errSquidMCP = errors.New("the Squid gateway engine cannot scope egress per MCP server (it cannot tell the sidecar's requests for one server from another's, nor the agent's): run a spec with [[mcp_servers]] with the built-in gateway")

// mcpPins is what the MCP stage carries from the plan to the run's end.
type mcpPins struct {
	lock    string   // the lock file beside the spec (mcppin.LockPath)
	missing []string // declared servers the lock does not pin yet
}

// mcpPlan adds to the plan's input what the spec's declared MCP servers
// need: the lock's pins and the run's credential placeholder for the
// sidecar. It refuses the Squid engine (exit 3), which cannot scope
// egress per server. nil without declared servers.
func mcpPlan(in *orchestrate.Input) (*mcpPins, error) {
	servers := in.Profile.Spec.MCPServers
	if len(servers) == 0 {
		return nil, nil
	}
	if in.GatewayEngine == orchestrate.EngineSquid {
		return nil, exitcode.With(exitcode.InvalidSpec, errSquidMCP)
	}
	m := &mcpPins{lock: mcppin.LockPath(in.Profile.Spec.Source)}
	lock, err := mcppin.Load(m.lock)
	if err != nil {
		return nil, err
	}
	pins := &mcppin.Lock{Schema: mcppin.Schema, Servers: []mcppin.Server{}}
	for _, s := range servers {
		if p, ok := lock.Server(s.Name); ok {
			pins.Put(p)
		} else {
			m.missing = append(m.missing, s.Name)
		}
	}
	js, err := json.Marshal(pins)
	if err != nil {
		return nil, fmt.Errorf("encoding pins: %w", err)
	}
	if in.Env == nil {
		in.Env = map[string][]dockerx.EnvVar{}
	}
	in.Env[orchestrate.RoleSidecar] = append(in.Env[orchestrate.RoleSidecar], dockerx.EnvVar{Name: spec.EnvMCPPins, Value: string(js)})
	// The sidecar sends a credentialed server's requests with the run's
	// placeholder (never the value), which the gateway got.
	for _, e := range in.Env[orchestrate.RoleGateway] {
		if e.Name == spec.EnvCredentialPlaceholder {
			in.Env[orchestrate.RoleSidecar] = append(in.Env[orchestrate.RoleSidecar], dockerx.EnvVar{Name: e.Name, Value: e.Value, Secret: true})
		}
	}
	return m, nil
}

// pinFirstRun writes to the lock, after a run in runDir, the definitions
// the sidecar observed of the servers the lock did not pin yet, and says
// so on w. A failure is a warning: the run's record is complete without
// it. Nothing happens without such servers, without a run directory, or
// when the sidecar connected to none (doctor and test-sandbox never do).
func (m *mcpPins) pinFirstRun(runDir string, w io.Writer) {
	if m == nil || runDir == "" || len(m.missing) == 0 {
		return
	}
	observed := filepath.Join(runDir, orchestrate.RoleSidecar, spec.FileMCPPins)
	if _, err := os.Stat(observed); err != nil {
		return
	}
	if err := addToLock(m.lock, observed, m.missing); err != nil {
		fmt.Fprintf(w, "warning: recording MCP tool definitions: %v\n", err)
		return
	}
	fmt.Fprintf(w, "pinned the tool definitions of %s in %s (first run; review them, and change them only with `mcpsidecar mcp pin --update`)\n", strings.Join(m.missing, ", "), m.lock)
}

// addToLock adds to the lock the observed definitions of the servers it
// does not pin yet; what it already pins is never changed here.
func addToLock(lockPath, observedPath string, names []string) error {
	observed, err := mcppin.Load(observedPath)
	if err != nil {
		return err
	}
	if observed == nil {
		return fmt.Errorf("the sidecar recorded no definitions (%s)", observedPath)
	}
	lock, err := mcppin.Load(lockPath)
	if err != nil {
		return err
	}
	if lock == nil {
		lock = &mcppin.Lock{Schema: mcppin.Schema}
	}
	for _, n := range names {
		if _, done := lock.Server(n); done {
			continue
		}
		if p, ok := observed.Server(n); ok {
			lock.Put(p)
		}
	}
	return lock.Save(lockPath)
}
