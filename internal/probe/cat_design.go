//go:build linux

package probe

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// designProbes are group G40: one probe per claim the design (README.md, docs/hardening.md) makes about the
// sandbox. Each is phrased as the attack the claim stops, so Allowed means
// the claim does not hold.
func designProbes() []Probe {
	const g = "G40"
	needGateway := func(c *Context) Goal {
		if c.GatewayURL == "" {
			return GoalContext
		}
		return GoalDeny
	}
	return []Probe{
		{Group: g, ID: "T01", Title: "Run without a seccomp filter", Goal: GoalDeny,
			Threat: "Kernel attack surface: dangerous syscalls (bpf, keyctl, mount, ptrace, unshare...) reachable without a seccomp filter.",
			Tool:   func(context.Context, *Env) Result { return seccompMode() }},
		{Group: g, ID: "T02", Title: "Run outside a Landlock domain", Goal: GoalDeny,
			Threat: "Filesystem escape: reading paths outside the policy when Landlock is not applied.",
			Tool:   func(_ context.Context, e *Env) Result { return landlockDomain(e.Ctx) }},
		{Group: g, ID: "T03", Title: "Execute a program (execve)", Goal: GoalDeny, Spawn: true,
			Threat: threatSpawn + " The no-spawn seccomp filter must refuse execve unless the spec grants shell_access.",
			Tool:   runSelfVersion},
		{Group: g, ID: "T04", Title: "Use a default route out of the sandbox", Goal: GoalDeny,
			Threat: threatEgress + " Judged from /proc/net/route and /proc/net/ipv6_route; nothing is sent.",
			Tool:   func(context.Context, *Env) Result { return defaultRoute() }},
		{Group: g, ID: "T05", Title: "Resolve an external name through the system resolver", Goal: GoalDeny, Threat: threatDNS,
			Tool: func(ctx context.Context, _ *Env) Result { return resolverReached(ctx, "probe-resolve.invalid") }},
		{Group: g, ID: "T06", Title: "Get a denied name past the gateway", Goal: GoalDeny, Adjust: needGateway,
			Threat: "Egress and DNS leaks through the gateway: a name outside the allowlist must be refused (403) before any lookup.",
			Tool: func(ctx context.Context, e *Env) Result {
				return gatewayRefuses(ctx, e, "http://"+e.Ctx.DeniedDomain+"/")
			}},
		{Group: g, ID: "T07", Title: "Reach a link-local or private address through the gateway", Goal: GoalDeny, Adjust: needGateway,
			Threat: "SSRF: the gateway used to reach cloud metadata (169.254.169.254) or a private address.",
			Tool: func(ctx context.Context, e *Env) Result {
				var ev []string
				for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://[::ffff:169.254.169.254]/latest/meta-data/"} {
					r := gatewayRefuses(ctx, e, u)
					if r.Outcome != Denied {
						return r
					}
					ev = append(ev, u+": "+r.Evidence)
				}
				return denied("The gateway refused every link-local target with 403.", strings.Join(ev, " | "))
			}},
		{Group: g, ID: "T08", Title: "Reach the MCP sidecar", Goal: GoalAllow,
			Adjust: func(c *Context) Goal {
				if c.SidecarURL == "" {
					return GoalContext
				}
				return GoalAllow
			},
			Threat: "Availability: the agent must reach its sidecar directly (GET /healthz).",
			Tool:   sidecarHealth},
		{Group: g, ID: "T09", Title: "Use the host's Docker socket", Goal: GoalDeny,
			Threat: "Host takeover: the Docker API is root on the host.",
			Tool:   func(context.Context, *Env) Result { return dockerSocket() }},
		{Group: g, ID: "T10", Title: "Resolve host and metadata names to a real address", Goal: GoalDeny,
			Threat: "Host and cloud metadata access by name: host.docker.internal and metadata.google.internal must map to an unroutable address in /etc/hosts.",
			Tool:   func(_ context.Context, e *Env) Result { return blackholed(e.Ctx.BlackholedHosts) }},
		{Group: g, ID: "T11", Title: "Write outside the declared writable paths", Goal: GoalDeny, Threat: threatWrite,
			Tool: func(_ context.Context, e *Env) Result { return undeclaredWritable(e.Ctx) }},
		{Group: g, ID: "T12", Title: "Write to every declared writable path", Goal: GoalAllow,
			Threat: "Availability: the workload must write where the spec says it can.",
			Tool:   func(_ context.Context, e *Env) Result { return declaredWritable(e.Ctx) }},
		{Group: g, ID: "T13", Title: "Hold Linux capabilities", Goal: GoalDeny,
			Threat: "Privilege escalation through capabilities (CapEff, CapPrm, CapBnd, CapAmb must be empty).",
			Tool:   func(context.Context, *Env) Result { return heldCaps() }},
		{Group: g, ID: "T14", Title: "Run as root", Goal: GoalDeny, Threat: "Privilege: root in the container is one kernel bug from root on the host.",
			Tool: func(context.Context, *Env) Result { return rootUser() }},
		{Group: g, ID: "T15", Title: "Gain privileges through exec (no_new_privs unset)", Goal: GoalDeny,
			Threat: "Privilege escalation through setuid binaries or file capabilities.",
			Tool:   func(context.Context, *Env) Result { return noNewPrivs() }},
		{Group: g, ID: "T16", Title: "Create processes and threads without limit", Goal: GoalDeny,
			Threat: "Denial of service: a fork or thread bomb exhausting the host's PIDs.",
			Tool:   func(_ context.Context, e *Env) Result { return pidsLimit(e.Snap, e.Ctx.Limits.Pids) }},
		{Group: g, ID: "T17", Title: "Use memory without limit", Goal: GoalDeny,
			Threat: "Denial of service: exhausting the host's memory.",
			Tool:   func(_ context.Context, e *Env) Result { return memoryLimit(e.Snap, e.Ctx.Limits.MemoryBytes) }},
		{Group: g, ID: "T18", Title: "Write a file past the size limit", Goal: GoalDeny,
			Threat: "Denial of service: filling the output disk (RLIMIT_FSIZE).",
			Tool:   func(_ context.Context, e *Env) Result { return fileSizeLimit(e.Ctx) }},
		{Group: g, ID: "T19", Title: "Find a real credential outside the environment (processes, files)", Goal: GoalDeny,
			Threat: threatKeys + " Credentials live in the gateway only; the workload holds a per-run placeholder. Searches every " +
				"other visible process's environment and command line (/proc/1/environ among them) and the files under the home, " +
				"temp, work and output directories and the well-known secret paths (/run/secrets, /var/run/secrets, /etc/environment) " +
				"for a key shape (sk-, ghp_, AKIA, Bearer ...) or a secret-named assignment that is not the run's placeholder. " +
				"Records places and shapes, never values. The own environment is G05 T05.",
			Tool: func(ctx context.Context, e *Env) Result { return readableCredentials(ctx, e.Ctx) }},
	}
}

func seccompMode() Result {
	st, err := selfStatus()
	if err != nil {
		return fromErr("Reading /proc/self/status", err)
	}
	ev := fmt.Sprintf("Seccomp=%s; Seccomp_filters=%s", st["Seccomp"], st["Seccomp_filters"])
	if st["Seccomp"] == "2" {
		return denied("A seccomp filter is active (mode 2).", ev)
	}
	return allowed("No seccomp filter is active.", ev)
}

// landlockABI asks the kernel for its Landlock ABI version.
func landlockABI() (int, error) {
	const createRulesetVersion = 1 // LANDLOCK_CREATE_RULESET_VERSION
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, createRulesetVersion)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}

// landlockDomain tests for a Landlock domain by an access no policy grants:
// listing "/". Unix permissions allow it to every user, so a refusal comes
// from Landlock.
func landlockDomain(c *Context) Result {
	abi, abiErr := landlockABI()
	ev := fmt.Sprintf("abi=%d; abi_err=%v", abi, abiErr)
	_, err := os.ReadDir("/")
	if err == nil {
		return allowed("Listing / succeeded: no Landlock domain restricts this process.", ev)
	}
	r := fromErr("Listing /", err)
	if r.Outcome != Denied {
		return r
	}
	if fx := deniedKnownFile(c); len(firstExisting(fx)) > 0 {
		if _, err := os.ReadFile(fx); err == nil {
			return allowed("Listing / was refused, but the denied fixture was readable.", ev)
		}
	}
	return denied("Listing / was refused: a Landlock domain is active.", ev+"; err="+err.Error())
}

func defaultRoute() Result {
	rs, err := routes()
	if err != nil {
		return fromErr("Reading the routing table", err)
	}
	d := defaultRoutes(rs)
	if len(d) == 0 {
		return denied("There is no default route (IPv4 or IPv6).", fmt.Sprintf("routes=%d", len(rs)))
	}
	var ev []string
	for _, r := range d {
		ev = append(ev, r.Prefix.String()+" via "+r.Iface)
	}
	return allowed("A default route exists.", strings.Join(ev, ","))
}

// gatewayRefuses sends a plain-HTTP request through the gateway: only a
// 403 is a refusal by policy. Any other answer (502 after a failed lookup
// or dial, or a 2xx) means the gateway tried to reach the target.
func gatewayRefuses(ctx context.Context, e *Env, target string) Result {
	if e.Ctx.GatewayURL == "" {
		return na("No gateway is configured.")
	}
	r := e.fetch(ctx, request{URL: target, Gateway: true})
	switch {
	case r.Outcome == Denied && strings.HasPrefix(r.Evidence, "status=403"):
		return denied("The gateway refused "+target+" with 403.", r.Evidence)
	case r.Outcome == Denied && strings.HasPrefix(r.Evidence, "status="):
		return allowed("The gateway did not refuse "+target+" by policy.", r.Evidence)
	}
	if r.Outcome == Denied {
		// The gateway could not be reached at all: nothing was measured.
		return errored("The gateway could not be reached.", r.Evidence)
	}
	return r
}

func sidecarHealth(ctx context.Context, e *Env) Result {
	if e.Ctx.SidecarURL == "" {
		return na("No sidecar URL is configured.")
	}
	u := strings.TrimSuffix(e.Ctx.SidecarURL, "/mcp") + "/healthz"
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return errored("The sidecar URL is malformed.", err.Error())
	}
	// Direct, as NO_PROXY makes it for the agent: the sidecar is on the
	// internal network, never behind the gateway.
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return requestErr(req.URL, "directly", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return denied(fmt.Sprintf("The sidecar answered %d.", resp.StatusCode), u)
	}
	return allowed("The sidecar answered 200.", u)
}

func dockerSocket() Result {
	present := firstExisting("/var/run/docker.sock", "/run/docker.sock")
	if len(present) == 0 {
		return denied("No Docker socket exists in the sandbox.", "")
	}
	c, err := net.DialTimeout("unix", present[0], 2*time.Second)
	if err != nil {
		return fromErr("Connecting to "+present[0], err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, "GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n"); err != nil {
		return fromErr("Writing to the Docker socket", err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fromErr("Reading from the Docker socket", err)
	}
	if strings.Contains(line, " 200") {
		return allowed("The Docker API answered through "+present[0]+".", strings.TrimSpace(line))
	}
	return denied("The Docker socket exists but its API refused.", strings.TrimSpace(line))
}

// blackholed checks that every name maps, in /etc/hosts, only to
// unroutable addresses. It reads the hosts file rather than resolving, so
// an unmapped real name is never sent to a resolver.
func blackholed(names []string) Result {
	data, err := os.ReadFile("/etc/hosts")
	if err != nil {
		return fromErr("Reading /etc/hosts", err)
	}
	hosts := parseHosts(data)
	var open []string
	for _, n := range names {
		addrs := hosts[strings.ToLower(n)]
		if len(addrs) == 0 {
			open = append(open, n+" (not mapped)")
			continue
		}
		for _, a := range addrs {
			if !unroutable(a) {
				open = append(open, n+" -> "+a.String())
			}
		}
	}
	if len(open) > 0 {
		return allowed("Some names are not black-holed.", strings.Join(open, ", "))
	}
	return denied("Every name maps only to an unroutable address.", strings.Join(names, ","))
}

// writeCandidates are directories a workload might try to write to.
var writeCandidates = []string{"/", "/etc", "/home", "/root", "/var", "/var/tmp", "/var/log", "/usr",
	"/usr/local", "/usr/local/bin", "/opt", "/srv", "/run", "/dev/shm", "/mnt", "/media", "/bin", "/lib"}

func undeclaredWritable(c *Context) Result {
	cands := append([]string{}, writeCandidates...)
	if ents, err := os.ReadDir("/"); err == nil {
		for _, e := range ents {
			if e.IsDir() && e.Name() != "proc" && e.Name() != "sys" && e.Name() != "dev" {
				cands = append(cands, "/"+e.Name())
			}
		}
	}
	cands = append(cands, c.DeniedDirectory, os.Getenv("HOME"))
	var writable, checked []string
	seen := map[string]bool{}
	for _, d := range cands {
		if d == "" || seen[d] || underAny(d, c.WritablePaths) || len(firstExisting(d)) == 0 {
			continue
		}
		seen[d] = true
		checked = append(checked, d)
		if writeProbe(d) == nil {
			writable = append(writable, d)
		}
	}
	if len(writable) > 0 {
		return allowed("Undeclared directories are writable.", "writable="+strings.Join(writable, ","))
	}
	return denied(fmt.Sprintf("None of %d undeclared directories is writable.", len(checked)), "checked="+strings.Join(checked, ","))
}

// underAny reports whether p is one of dirs or below one.
func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

func declaredWritable(c *Context) Result {
	var failed []string
	for _, d := range c.WritablePaths {
		if err := writeProbe(d); err != nil {
			failed = append(failed, d+": "+err.Error())
		}
	}
	if len(failed) > 0 {
		return denied("Declared writable paths refuse writes.", strings.Join(failed, "; "))
	}
	return allowed("Every declared writable path accepts writes.", strings.Join(c.WritablePaths, ","))
}

func heldCaps() Result {
	st, err := selfStatus()
	if err != nil {
		return fromErr("Reading /proc/self/status", err)
	}
	var held []string
	for _, k := range []string{"CapEff", "CapPrm", "CapBnd", "CapAmb"} {
		names, err := decodeCaps(st[k])
		if err != nil {
			return errored("A capability mask could not be decoded.", err.Error())
		}
		if len(names) > 0 {
			held = append(held, fmt.Sprintf("%s=%s", k, strings.Join(names, ",")))
		}
	}
	if len(held) > 0 {
		return allowed("The process holds capabilities.", strings.Join(held, "; "))
	}
	return denied("Every capability set is empty.", "")
}

func rootUser() Result {
	ev := fmt.Sprintf("uid=%d; euid=%d; gid=%d; egid=%d", os.Getuid(), os.Geteuid(), os.Getgid(), os.Getegid())
	if os.Getuid() == 0 || os.Geteuid() == 0 || os.Getgid() == 0 || os.Getegid() == 0 {
		return allowed("The process runs as root (uid or gid 0).", ev)
	}
	return denied("The process runs as an unprivileged user.", ev)
}

func noNewPrivs() Result {
	st, err := selfStatus()
	if err != nil {
		return fromErr("Reading /proc/self/status", err)
	}
	if st["NoNewPrivs"] == "1" {
		return denied("no_new_privs is set.", "NoNewPrivs=1")
	}
	return allowed("no_new_privs is not set.", "NoNewPrivs="+st["NoNewPrivs"])
}
