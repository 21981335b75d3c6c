package orchestrate

import (
	"fmt"
	"maps"
	"path/filepath"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/egress/squidimage"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// Gateway engines (--gateway-engine).
const (
	EngineOurs  = "ours"  // mcpsidecar gateway, in our image
	EngineSquid = "squid" // Squid with the profile's squid.conf
)

// DefaultSquidImage is --squid-image's default: the image
// scripts/build-squid-image.sh builds (squidimage.Image). The harness never
// pulls, so a registry name such as ubuntu/squid:latest would never be
// there offline.
const DefaultSquidImage = squidimage.Image

// SquidConfFile is the run directory's copy of the generated squid.conf;
// the Squid gateway mounts that very file read-only.
const SquidConfFile = spec.FileSquidConf

func (in Input) validateEngine() error {
	switch in.GatewayEngine {
	case "", EngineOurs:
		return nil
	case EngineSquid:
		if in.SquidImage == "" {
			return fmt.Errorf("planning run %s: gateway engine squid: no Squid image", in.RunID)
		}
		if in.Profile.SquidConf == "" {
			return fmt.Errorf("planning run %s: gateway engine squid: the spec has no gateway (no network capability)", in.RunID)
		}
		if in.Profile.RelaysTelemetry() {
			return exitcode.With(exitcode.InvalidSpec, squidRelayError(in.Profile.Spec))
		}
		return nil
	}
	return fmt.Errorf("planning run %s: unknown gateway engine %q (want %s or %s)", in.RunID, in.GatewayEngine, EngineOurs, EngineSquid)
}

// squidRelayError refuses agent_telemetry with the Squid engine, naming
// the spec line: the relay is the built-in gateway's, and Squid has no
// port 4318, so the workload's telemetry would go nowhere while the spec
// and its ledger say it goes to the collector.
func squidRelayError(s *spec.Spec) error {
	where := s.Source
	if s.AgentTelemetryLine > 0 {
		where = fmt.Sprintf("%s:%d", s.Source, s.AgentTelemetryLine)
	}
	return fmt.Errorf("%s: agent_telemetry = true needs the built-in gateway's telemetry relay, which the Squid gateway engine has not: run with --gateway-engine ours, or remove agent_telemetry from the spec", where)
}

// squid turns the gateway step into Squid's: its image and user, the
// tmpfs mounts it writes on the read-only root, the run's squid.conf
// mounted read-only where the image's entrypoint reads it (threat: a
// compromised Squid rewriting its own rules for a reload; the output
// directory it can write holds only its access log), and a TCP
// readiness check. The spec's other hardening stays: cap-drop ALL,
// no-new-privileges, the seccomp profile (Squid 5.7 runs under it),
// limits, networks and DNS. The in-process layers (Landlock, no-spawn)
// are our binary's and do not apply: the harness records that as a
// degradation.
func (in Input) squid(st *Step) {
	cs := &st.Spec
	cs.Image = in.SquidImage
	if _, ok := in.CmdOverride[RoleGateway]; !ok {
		cs.Cmd = []string{} // the image's entrypoint: squid -N -d 1 -f squidimage.ConfPath
	}
	cs.User = squidimage.User
	cs.Tmpfs = maps.Clone(squidimage.Tmpfs)
	// Only the run's own variables: the harden policy and Go settings are
	// for our binary.
	cs.Env = in.env(RoleGateway, spec.Container{})
	conf := dockerx.Mount{Source: filepath.Join(in.RunDir, SquidConfFile), Target: squidimage.ConfPath, ReadOnly: true}
	cs.Mounts = append([]dockerx.Mount{cs.Mounts[0], conf}, cs.Mounts[1:]...)
	st.Ready.Path, st.Ready.TCP = "", true
}
