package orchestrate

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/hold"
	"github.com/mcpsidecar/mcpsidecar/internal/plan"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// Input is everything a plan depends on.
type Input struct {
	Profile  *spec.Profile
	RunID    string
	RunDir   string // absolute host path of the run directory
	Image    string
	Workload Workload
	// Env adds variables per role, after the spec's: forwarded host
	// values (marked secret) and run settings such as the question.
	Env   map[string][]dockerx.EnvVar
	Owner Owner
	// ExtraMounts adds read-only fixtures per role; they live outside the
	// role's writable output directory.
	ExtraMounts map[string][]dockerx.Mount
	// ExtraLabels are added to every resource (tests add mcpsidecar.test=1).
	ExtraLabels map[string]string
	// Keep marks every resource with LabelKept (--keep): gc leaves it.
	Keep bool
	// WorkloadArgs are appended to the agent container's command.
	WorkloadArgs []string
	// DropRoutes: the engine (older than 25) gives an internal-only
	// container a default route; the harness removes it while the
	// container is held (Step.DropRoute), before the role's work.
	DropRoutes bool
	// TraceParent is the run span's trace context (W3C traceparent,
	// otelexport.RunTraceParent), given to the agent when the spec relays
	// its telemetry.
	TraceParent string
	// HoldAll holds every role's container at start, hardened and before
	// its work, until the harness has observed it from outside (and
	// removed its route, DropRoutes): a role that ends fast cannot end
	// unseen. Not a Squid gateway, nor a role whose command CmdOverride
	// replaces: neither runs our role code, which waits for the release.
	HoldAll bool
	// HoldToken is the run's release token (hold.TokenEnv), given to every
	// held role: a release file that does not hold it is refused. Needed
	// when a step is held.
	HoldToken string
	// Token is appended to the run id in Docker names (see dockerID).
	Token string
	// CmdOverride replaces a role's command (tests: a workload that runs
	// past its timeout, a gateway that cannot start). Such a role is not
	// held (HoldAll, DropRoutes).
	CmdOverride map[string][]string
	// GatewayEngine is EngineOurs (also when empty) or EngineSquid, which
	// runs SquidImage with the profile's squid.conf (see squid.go).
	GatewayEngine string
	SquidImage    string
	// SubnetPool is the private IPv4 range the run's /28 networks come
	// from; the zero value means DefaultSubnetPool.
	SubnetPool netip.Prefix
}

// Owner identifies the harness process that owns a run's resources.
type Owner struct {
	PID  int
	Host string
}

// The plan's aggregate is data of internal/plan, whatever runs it; these
// are its names where the planner and the Docker session use them.
type (
	Plan      = plan.Plan
	Step      = plan.Step
	HostAlias = plan.HostAlias
	Readiness = plan.Readiness
)

// NewPlan decides the networks and containers of a run. It is pure.
func NewPlan(in Input) (Plan, error) {
	if err := in.validate(); err != nil {
		return Plan{}, err
	}
	p := Plan{RunID: in.RunID, SubnetPool: in.pool().String(), Networks: in.networks()}
	for _, role := range in.Profile.Roles {
		st, err := in.step(role)
		if err != nil {
			return Plan{}, err
		}
		p.Containers = append(p.Containers, st)
	}
	return p, nil
}

func (in Input) validate() error {
	switch {
	case in.Profile == nil:
		return fmt.Errorf("planning run: no profile")
	case in.RunID == "":
		return fmt.Errorf("planning run: empty run id")
	case !filepath.IsAbs(in.RunDir):
		return fmt.Errorf("planning run %s: run directory %q is not absolute", in.RunID, in.RunDir)
	case in.Image == "":
		return fmt.Errorf("planning run %s: no image", in.RunID)
	}
	switch in.Workload {
	case WorkloadAgent, WorkloadCheck, WorkloadProbe:
	default:
		return fmt.Errorf("planning run %s: unknown workload %q", in.RunID, in.Workload)
	}
	if err := in.validateEngine(); err != nil {
		return err
	}
	if err := checkPool(in.pool()); err != nil {
		return fmt.Errorf("planning run %s: subnet pool %s: %w", in.RunID, in.pool(), err)
	}
	if n := len(in.Profile.Roles); n == 0 || in.Profile.Roles[n-1] != RoleAgent {
		return fmt.Errorf("planning run %s: the profile's roles %v do not end with the agent", in.RunID, in.Profile.Roles)
	}
	for _, role := range in.Profile.Roles {
		c, ok := in.Profile.Containers[role]
		if !ok {
			return fmt.Errorf("planning run %s: the profile has no container for role %s", in.RunID, role)
		}
		for _, n := range c.Networks {
			if n != spec.NetInternal && n != spec.NetEgress {
				return fmt.Errorf("planning run %s: role %s: unknown network %q", in.RunID, role, n)
			}
		}
	}
	return nil
}

func (in Input) uses(network string) bool {
	for _, role := range in.Profile.Roles {
		for _, n := range in.Profile.Containers[role].Networks {
			if n == network {
				return true
			}
		}
	}
	return false
}

// labels are the ownership labels of every resource; role is empty for
// networks.
func (in Input) labels(role string) map[string]string {
	l := map[string]string{
		LabelApp:  "1",
		LabelRun:  in.RunID,
		LabelPID:  strconv.Itoa(in.Owner.PID),
		LabelHost: in.Owner.Host,
	}
	if role != "" {
		l[LabelRole] = role
	}
	// Always set, so that a workload image's own LABEL mcpsidecar.kept=1
	// (image labels are inherited by its container) cannot make gc pass
	// over a container of a run that asked for nothing to be kept.
	l[LabelKept] = "0"
	if in.Keep {
		l[LabelKept] = "1"
	}
	for k, v := range in.ExtraLabels {
		if _, taken := l[k]; !taken {
			l[k] = v
		}
	}
	return l
}

func (in Input) step(role string) (Step, error) {
	c := in.Profile.Containers[role]
	if role == RoleAgent && in.Workload == WorkloadProbe {
		// The probe runs in the agent's container with the agent's
		// hardening, so the report measures the same sandbox.
		c = in.Profile.Probe()
	}
	out := filepath.Join(in.RunDir, role)
	target := outputTarget(c)
	cs := dockerx.ContainerSpec{
		Name: ContainerName(c.Name, in.dockerID()), Image: in.Image, Cmd: in.cmd(role, c),
		Env: in.env(role, c), User: c.User, Labels: in.labels(role),
		Networks:       in.attachments(c),
		ReadOnlyRootfs: c.ReadonlyRootfs, CapDrop: orEmpty(c.CapDrop), CapAdd: orEmpty(c.CapAdd),
		NoNewPrivileges: c.NoNewPrivileges, Seccomp: c.Seccomp, Tmpfs: c.Tmpfs,
		Mounts: append([]dockerx.Mount{{Source: out, Target: target}}, in.ExtraMounts[role]...),
		Init:   true, CgroupnsPrivate: c.CgroupnsMode == "private",
		PidsLimit: c.PidsLimit, MemoryBytes: c.Memory, MemorySwapBytes: c.MemorySwap, NanoCPUs: c.NanoCPUs,
		Ulimits: ulimits(c.Ulimits), Sysctls: c.Sysctls, ExtraHosts: orEmpty(c.ExtraHosts),
		MaskedPaths: c.MaskedPaths, DNS: []string{}, DNSOptions: []string{},
		StopTimeout: 5 * time.Second,
	}
	var hosts []HostAlias
	internalOnly := len(c.Networks) > 0 && !contains(c.Networks, spec.NetEgress)
	if internalOnly {
		isolateDNS(&cs)
		hosts = in.peers(role)
	}
	_, overridden := in.CmdOverride[role]
	squid := role == RoleGateway && in.GatewayEngine == EngineSquid
	dropRoute := in.DropRoutes && internalOnly && !overridden
	held := (in.HoldAll && !overridden && !squid) || dropRoute
	if held {
		if in.HoldToken == "" {
			return Step{}, fmt.Errorf("container %s is held at start but the plan has no release token", role)
		}
		// The harness's values replace a variable of the same name
		// (red team, session 37: a spec's MCPSIDECAR_HOLD_FILE stood
		// beside the harness's, and the unstable sort chose).
		cs.Env = setEnv(cs.Env, dockerx.EnvVar{Name: hold.Env, Value: hold.Path(target)})
		cs.Env = setEnv(cs.Env, dockerx.EnvVar{Name: hold.TokenEnv, Value: in.HoldToken})
	}
	st := Step{Role: role, OutputDir: out, Spec: cs, Workload: role == RoleAgent, Hold: held, DropRoute: dropRoute, Hosts: hosts}
	switch role {
	case RoleGateway:
		st.Ready = &Readiness{Port: spec.GatewayPort, Path: "/healthz"}
		if in.GatewayEngine == EngineSquid {
			in.squid(&st)
		}
	case RoleSidecar:
		st.Ready = &Readiness{Port: spec.SidecarPort, Path: "/healthz"}
	}
	if _, ok := in.Profile.Containers[RoleSidecar]; ok && role == RoleGateway && !SidecarOffline(in.Workload) {
		// An online sidecar closes its upstream sessions (an HTTP DELETE
		// each) through the gateway as it stops: the gateway must still
		// serve then, or the close is refused and logged as a denial.
		st.StopAfter = []string{RoleSidecar}
	}
	return st, nil
}

// peers are the aliases, on the internal network, of the roles started
// before role: an internal-only role reaches them through /etc/hosts, so
// it needs no resolver (and its seccomp filter can refuse UDP).
func (in Input) peers(role string) []HostAlias {
	var out []HostAlias
	for _, r := range in.Profile.Roles {
		if r == role {
			break
		}
		c := in.Profile.Containers[r]
		if !contains(c.Networks, spec.NetInternal) {
			continue
		}
		for _, a := range c.Aliases {
			out = append(out, HostAlias{Name: a, Role: r})
		}
	}
	return out
}

// cmd is the spec's command, except for the agent container, whose
// command is chosen by the workload.
func (in Input) cmd(role string, c spec.Container) []string {
	if o, ok := in.CmdOverride[role]; ok {
		return append([]string{}, o...)
	}
	if role == RoleSidecar {
		return in.sidecarCmd(c)
	}
	if role != RoleAgent {
		return append([]string{}, c.Cmd...)
	}
	cmd := append([]string{}, c.Cmd...)
	if in.Workload == WorkloadCheck {
		cmd = []string{"agent", "--check"}
	}
	return append(cmd, in.WorkloadArgs...)
}

// sidecarCmd is the spec's sidecar command plus the run's artifacts and
// mode. The audit log is an artifact of the run: it must land in the
// sidecar's output directory. Doctor and test-sandbox runs add
// FlagNoUpstream (see SidecarOffline).
func (in Input) sidecarCmd(c spec.Container) []string {
	cmd := append([]string{}, c.Cmd...)
	if !contains(cmd, "--audit-log") {
		cmd = append(cmd, "--audit-log", outputTarget(c)+"/"+AuditFile)
	}
	if SidecarOffline(in.Workload) && !contains(cmd, FlagNoUpstream) {
		cmd = append(cmd, FlagNoUpstream)
	}
	return cmd
}

// FlagNoUpstream starts the sidecar without its upstream.
const FlagNoUpstream = "--no-upstream"

// NoteSidecarOffline is recorded in run-metadata.json's degradations of
// every run whose sidecar is started with FlagNoUpstream.
const NoteSidecarOffline = "sidecar upstream disabled for doctor/test-sandbox: no traffic leaves the machine (the Learn proxy tools answer with an error)"

// SidecarOffline reports whether the workload's sidecar runs with
// FlagNoUpstream: every workload but the model loop. The threat: the
// sidecar's upstream check goes through the gateway, which resolves the
// upstream's real name, and that DNS query leaves the machine; doctor and
// test-sandbox promise that nothing does, and neither calls a proxy tool.
func SidecarOffline(w Workload) bool { return w != WorkloadAgent }

// attachments puts a dual-homed container on the egress network first (its
// default route), then on the internal one where the others reach it by
// alias. No networks means network mode "none".
func (in Input) attachments(c spec.Container) []dockerx.Attachment {
	if len(c.Networks) == 0 {
		return []dockerx.Attachment{{Network: "none", Aliases: []string{}}}
	}
	var a []dockerx.Attachment
	if contains(c.Networks, spec.NetEgress) {
		a = append(a, dockerx.Attachment{Network: EgressNetwork(in.dockerID()), Aliases: []string{}})
	}
	if contains(c.Networks, spec.NetInternal) {
		a = append(a, dockerx.Attachment{Network: InternalNetwork(in.dockerID()), Aliases: orEmpty(c.Aliases)})
	}
	return a
}

// isolateDNS points the embedded resolver's upstream at 0.0.0.0 inside the
// container's own namespace. Threat: engines older than 26 forward external
// names from --internal networks (DNS tunnelling out of a network with no
// route). Docker's embedded DNS still answers the run's aliases; any other
// name has nowhere to go and never leaves the container.
func isolateDNS(c *dockerx.ContainerSpec) {
	c.DNS = []string{"0.0.0.0"}
	c.DNSOptions = []string{"attempts:1", "timeout:1"}
}

// env is the spec's static environment, then the run's additions (a later
// entry with the same name wins, as in Docker), sorted by name.
func (in Input) env(role string, c spec.Container) []dockerx.EnvVar {
	byName := map[string]dockerx.EnvVar{}
	for k, v := range c.Env {
		byName[k] = dockerx.EnvVar{Name: k, Value: v}
	}
	byName[EnvRunID] = dockerx.EnvVar{Name: EnvRunID, Value: in.RunID}
	if role == RoleAgent && in.Profile.RelaysTelemetry() && in.TraceParent != "" {
		// The run's trace context, so the workload's own spans, relayed
		// by the gateway, join the run's trace (issue 33).
		byName[spec.EnvTraceParent] = dockerx.EnvVar{Name: spec.EnvTraceParent, Value: in.TraceParent}
	}
	for _, e := range in.Env[role] {
		byName[e.Name] = e
	}
	env := make([]dockerx.EnvVar, 0, len(byName))
	for _, e := range byName {
		env = append(env, e)
	}
	sort.Slice(env, func(i, j int) bool { return env[i].Name < env[j].Name })
	return env
}

// setEnv sets e in env, sorted by name, replacing any variable of its name.
func setEnv(env []dockerx.EnvVar, e dockerx.EnvVar) []dockerx.EnvVar {
	env = slices.DeleteFunc(env, func(x dockerx.EnvVar) bool { return x.Name == e.Name })
	env = append(env, e)
	slices.SortStableFunc(env, func(a, b dockerx.EnvVar) int { return strings.Compare(a.Name, b.Name) })
	return env
}

func ulimits(in []spec.Ulimit) []dockerx.Ulimit {
	out := make([]dockerx.Ulimit, 0, len(in))
	for _, u := range in {
		out = append(out, dockerx.Ulimit{Name: u.Name, Soft: u.Soft, Hard: u.Hard})
	}
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// outputTarget is where the role's output directory is mounted.
func outputTarget(c spec.Container) string {
	if c.OutputDir == "" {
		return spec.OutputDir
	}
	return c.OutputDir
}
