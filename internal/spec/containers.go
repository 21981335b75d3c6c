package spec

import (
	"maps"
	"slices"
	"strconv"

	"github.com/mcpsidecar/mcpsidecar/internal/agent/agentenv"
	"github.com/mcpsidecar/mcpsidecar/internal/harden/hardenpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

const (
	mib = 1 << 20
	cpu = 1_000_000_000 // NanoCPUs per CPU
)

// limits are one role's resource limits. Each is sized for a Go process
// with headroom, not for the seed's Python (whose 128 MiB / 64 pids would
// starve the TLS and JSON work of the agent): memory covers the Go heap
// under GOMEMLIMIT (3/4 of it) plus the memory-backed tmpfs; pids and
// nproc cover the runtime's threads (GOMAXPROCS 1 plus threads blocked in
// syscalls, typically under 20) with room, while still stopping a fork or
// thread bomb; nofile covers concurrent connections (the gateway holds two
// per tunnel); fsize caps any single file a role writes (answers and logs
// are far smaller).
type limits struct {
	memory, tmpfs int64
	pids, nofile  int64
	nproc, fsize  int64
	nanoCPUs      int64
}

var roleLimits = map[string]limits{
	RoleAgent:   {memory: 512 * mib, tmpfs: 64 * mib, pids: 256, nofile: 4096, nproc: 512, fsize: 64 * mib, nanoCPUs: cpu},
	RoleSidecar: {memory: 256 * mib, tmpfs: 16 * mib, pids: 128, nofile: 4096, nproc: 512, fsize: 64 * mib, nanoCPUs: cpu},
	RoleGateway: {memory: 256 * mib, tmpfs: 16 * mib, pids: 256, nofile: 8192, nproc: 512, fsize: 64 * mib, nanoCPUs: cpu},
}

// blackHoledHosts resolve to 0.0.0.0 inside every container. The threat:
// reaching the Docker host or a cloud metadata service by a well-known
// name. 0.0.0.0 is refused by the gateway (unspecified) and reaches no
// other machine.
var blackHoledHosts = []string{
	"host.docker.internal", "gateway.docker.internal",
	"kubernetes.docker.internal", "metadata.google.internal",
}

// maskedPaths is Docker's default list (setting MaskedPaths replaces it),
// which already masks /proc/acpi and /sys/firmware as the seed did with
// tmpfs mounts.
var maskedPaths = []string{
	"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys",
	"/proc/latency_stats", "/proc/sched_debug", "/proc/scsi", "/proc/timer_list",
	"/proc/timer_stats", "/sys/devices/virtual/powercap", "/sys/firmware",
}

// baseEnv is what every role gets: GODEBUG turns off Multipath TCP (not
// needed, and one more kernel surface); HOME points into the tmpfs.
func baseEnv() map[string]string {
	return map[string]string{"GODEBUG": "multipathtcp=0", "HOME": "/tmp"}
}

func proxyEnv(noProxy string) map[string]string {
	return map[string]string{
		"HTTP_PROXY": ProxyURL, "HTTPS_PROXY": ProxyURL,
		"http_proxy": ProxyURL, "https_proxy": ProxyURL,
		"NO_PROXY": noProxy, "no_proxy": noProxy,
	}
}

// basePolicy is the Landlock and seccomp hardening every role starts
// from: read the system files it needs, write only its tmpfs mounts and
// its output directory, execute only its own binary, spawn nothing, open
// no netlink socket (no role lists interfaces or routes) and no UDP
// socket (Landlock does not see UDP; only the gateway's resolver needs it,
// the other roles find their peers in /etc/hosts). Listening is refused
// unless the role serves (see [serves]).
func basePolicy(role string, memory int64) hardenpolicy.Policy {
	return hardenpolicy.Policy{
		Schema: hardenpolicy.Schema,
		Role:   role,
		Landlock: hardenpolicy.Landlock{
			MinABI:         4,
			ReadOnlyDirs:   []string{"/etc", "/proc"},
			ReadOnlyFiles:  []string{"/dev/random", "/dev/urandom"},
			ReadWriteDirs:  []string{"/tmp", WorkDir, OutputDir},
			ReadWriteFiles: []string{"/dev/null"},
			ExecFiles:      []string{"/mcpsidecar"},
			ConnectTCP:     []uint16{},
			BindTCP:        []uint16{},
		},
		NoSpawn:         true,
		DenyUnixSockets: true,
		NoListen:        true,
		NoUDP:           true,
		NoNetlink:       true,
		// Landlock TCP rules need ABI 4 (Linux 6.7); they apply where
		// the kernel has them (docs/hardening.md), so best effort and a
		// missing layer is reported, not fatal.
		BestEffort:      []string{hardenpolicy.LayerLandlockNet},
		GoMaxProcs:      1,
		GoMemLimitBytes: memory / 4 * 3,
	}
}

// applyBaseline fills the Docker options every role shares.
func applyBaseline(c *Container, seccompJSON string) {
	l := roleLimits[c.Role]
	c.User = User
	c.ReadonlyRootfs = true
	c.CapDrop = []string{"ALL"}
	c.CapAdd = []string{}
	c.NoNewPrivileges, c.Seccomp = true, seccompJSON
	c.SecurityOpt = []string{"no-new-privileges:true", "seccomp=" + seccompJSON}
	tmpfsOpts := "rw,noexec,nosuid,nodev,size=" + strconv.FormatInt(l.tmpfs, 10)
	c.Tmpfs = map[string]string{
		"/tmp":  tmpfsOpts + ",mode=1777",
		WorkDir: tmpfsOpts + ",uid=65532,gid=65532,mode=0700",
	}
	c.Memory, c.MemorySwap, c.NanoCPUs, c.PidsLimit = l.memory, l.memory, l.nanoCPUs, l.pids
	c.Ulimits = []Ulimit{
		{Name: "nofile", Soft: l.nofile, Hard: l.nofile},
		{Name: "nproc", Soft: l.nproc, Hard: l.nproc},
		{Name: "fsize", Soft: l.fsize, Hard: l.fsize},
	}
	// Docker otherwise sets 0, letting an unprivileged process bind
	// ports below 1024 and impersonate a system service.
	// TCP Fast Open's client side connects inside sendto(MSG_FASTOPEN),
	// where Landlock's connect rule never looks (landlock-lsm/linux issue
	// 41); 0 turns it off in the container's network namespace, under the
	// seccomp filter's own refusal.
	c.Sysctls = map[string]string{
		"net.ipv4.ip_unprivileged_port_start": "1024",
		"net.ipv4.tcp_fastopen":               "0",
	}
	c.ExtraHosts = nil
	for _, h := range blackHoledHosts {
		c.ExtraHosts = append(c.ExtraHosts, h+":0.0.0.0")
	}
	c.MaskedPaths = slices.Clone(maskedPaths)
	c.CgroupnsMode = "private"
	c.OutputDir = OutputDir
}

func gatewayContainer(cfg netpolicy.Config, holdsCredentials, relay bool) Container {
	h := basePolicy(RoleGateway, roleLimits[RoleGateway].memory)
	// 53: DNS over TCP when an answer is truncated (UDP is not a
	// Landlock right); the rest are the ports the policy permits,
	// including those its entries name ("models.lan:11434").
	ports := append([]uint16{53}, cfg.DialPorts()...)
	slices.Sort(ports)
	h.Landlock.ConnectTCP = slices.Compact(ports)
	h.Landlock.BindTCP = []uint16{GatewayPort}
	serves(&h)
	h.NoUDP = false // its resolver asks Docker's DNS over UDP
	cmd := []string{"gateway", "--listen", ":" + strconv.Itoa(GatewayPort),
		"--decision-log", OutputDir + "/egress-decisions.jsonl"}
	if holdsCredentials {
		h.Landlock.BindTCP = append(h.Landlock.BindTCP, CredentialPort)
		cmd = append(cmd, "--credential-listen", ":"+strconv.Itoa(CredentialPort))
	}
	if relay {
		h.Landlock.BindTCP = append(h.Landlock.BindTCP, RelayPort)
		cmd = append(cmd, "--otlp-relay-listen", ":"+strconv.Itoa(RelayPort))
	}
	return Container{
		Role:       RoleGateway,
		Name:       "egress-gateway",
		Cmd:        cmd,
		Env:        baseEnv(),
		ForwardEnv: []string{},
		Harden:     h,
		Networks:   []string{NetInternal, NetEgress},
		Aliases:    []string{GatewayAlias},
	}
}

func sidecarContainer() Container {
	h := basePolicy(RoleSidecar, roleLimits[RoleSidecar].memory)
	h.Landlock.ConnectTCP = []uint16{GatewayPort}
	h.Landlock.BindTCP = []uint16{SidecarPort}
	serves(&h)
	env := baseEnv()
	maps.Copy(env, proxyEnv("localhost,127.0.0.1,"+SidecarAlias))
	return Container{
		Role:       RoleSidecar,
		Name:       "mcp-sidecar",
		Cmd:        []string{"sidecar", "--audit-log", OutputDir + "/mcp-sidecar-tool-calls.jsonl"},
		Env:        env,
		ForwardEnv: []string{},
		Harden:     h,
		Networks:   []string{NetInternal},
		Aliases:    []string{SidecarAlias},
	}
}

func agentContainer(s *Spec, creds []ResolvedCredential) Container {
	h := basePolicy(RoleAgent, roleLimits[RoleAgent].memory)
	h.NoSpawn = !s.Has(CapShellAccess)
	c := Container{
		Role: RoleAgent, Name: "sandbox-agent", Cmd: []string{"agent"},
		Env: map[string]string{}, ForwardEnv: []string{}, Harden: h,
		Networks: []string{}, Aliases: []string{},
	}
	for _, v := range s.Env { // spec first: the harness's values below win
		if v.FromHost {
			c.ForwardEnv = append(c.ForwardEnv, v.Name)
		} else {
			c.Env[v.Name] = v.Value
		}
	}
	if s.Has(CapOpenAIAgents) {
		c.ForwardEnv = append(c.ForwardEnv, openAIForward...)
	}
	c.ForwardEnv = withoutHeld(c.ForwardEnv, creds)
	for _, cr := range creds {
		// A credential that lives in the sandbox (credentials_in_sandbox)
		// is the real value in the agent's environment, as the ledger
		// says: forwarded from the host whatever its name (red team,
		// session 38: a declared GITHUB_TOKEN was listed as in the
		// agent's environment and was not there).
		if cr.Lives == LivesSandbox {
			c.ForwardEnv = append(c.ForwardEnv, cr.FromHost)
		}
	}
	maps.Copy(c.Env, baseEnv())
	c.Env[EnvInSandbox] = "1"
	if s.Has(CapNetwork) {
		c.Networks = []string{NetInternal}
		c.Harden.Landlock.ConnectTCP = []uint16{GatewayPort}
		noProxy := SidecarAlias + ",localhost,127.0.0.1"
		if heldByGateway(creds) {
			// The credential listener is reached directly, in origin
			// form: through the proxy port the gateway's own name is
			// not an allowed destination.
			c.Harden.Landlock.ConnectTCP = append(c.Harden.Landlock.ConnectTCP, CredentialPort)
			noProxy = SidecarAlias + "," + GatewayAlias + ",localhost,127.0.0.1"
		}
		if relaysTelemetry(s) {
			// The relay is reached directly, like the credential
			// listener: the gateway's own name is no proxy destination.
			c.Harden.Landlock.ConnectTCP = append(c.Harden.Landlock.ConnectTCP, RelayPort)
			noProxy = SidecarAlias + "," + GatewayAlias + ",localhost,127.0.0.1"
			c.Env[EnvOTLPEndpoint], c.Env[EnvOTLPProtocol] = RelayURL, "http/protobuf"
		}
		maps.Copy(c.Env, proxyEnv(noProxy))
	}
	if s.Has(CapMCPClient) {
		c.Env[EnvSidecarURL] = SidecarURL
		c.Harden.Landlock.ConnectTCP = append(c.Harden.Landlock.ConnectTCP, SidecarPort)
	}
	c.ForwardEnv = forwardable(sortedUnique(c.ForwardEnv), c.Env)
	return c
}

// heldByGateway reports whether the gateway holds any credential.
func heldByGateway(creds []ResolvedCredential) bool {
	return slices.ContainsFunc(creds, func(c ResolvedCredential) bool { return c.Lives == LivesGateway })
}

// withoutHeld drops from names the host variables of credentials the
// gateway holds: the harness sets the agent's copy to the placeholder at
// run time (and, for openai_agents' default, OPENAI_BASE_URL to the
// credential listener). A credential that lives in the sandbox is
// forwarded as before.
func withoutHeld(names []string, creds []ResolvedCredential) []string {
	var drop []string
	for _, c := range creds {
		if c.Lives != LivesGateway {
			continue
		}
		drop = append(drop, c.FromHost)
		if c.Default {
			drop = append(drop, agentenv.BaseURL)
		}
	}
	return slices.DeleteFunc(names, func(n string) bool { return slices.Contains(drop, n) })
}

// serves lets a role that binds a port listen on it.
func serves(h *hardenpolicy.Policy) { h.NoListen = false }

// forwardable drops host variables the harness sets itself: its value
// wins, as in the seed.
func forwardable(names []string, env map[string]string) []string {
	out := names[:0]
	for _, n := range names {
		if _, set := env[n]; !set {
			out = append(out, n)
		}
	}
	return out
}

func cloneContainer(c Container) Container {
	c.Cmd = slices.Clone(c.Cmd)
	c.Env = maps.Clone(c.Env)
	c.ForwardEnv = slices.Clone(c.ForwardEnv)
	return c
}
