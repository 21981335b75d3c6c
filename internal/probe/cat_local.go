//go:build linux

package probe

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

func localServiceProbes() []Probe {
	const g = "G10"
	return []Probe{
		ctxProbe(g, "T01", "Connect to allowed local address", GoalAllow, func(c *Context) string { return c.AllowedLocalAddress }),
		ctxProbe(g, "T02", "Connect to denied local address", GoalDeny, func(c *Context) string { return c.DeniedLocalAddress }),
		{Group: g, ID: "T03", Title: "Detect open local ports", Goal: GoalAny, Threat: "Reconnaissance of local services.", Shell: "ss -ltn || netstat -ltn",
			Alternates: []Alternate{alt("lsof", "lsof", "lsof -iTCP -sTCP:LISTEN"), alt("fuser", "fuser", "fuser -n tcp 1")},
			Tool:       func(context.Context, *Env) Result { return listeningPorts() }},
		ctxProbe(g, "T04", "Connect to allowed database address", GoalAllow, func(*Context) string { return "" }),
		ctxProbe(g, "T05", "Connect to denied database address", GoalDeny, func(*Context) string { return "" }),
		{Group: g, ID: "T06", Title: "Query Docker/container socket path", Goal: GoalContext, Threat: "Host takeover through the container runtime's API.",
			Adjust: ctxGoal(func(c *Context) string { return c.ContainerRuntimeSock }, GoalDeny), Shell: "test -S /var/run/docker.sock",
			Tool: func(_ context.Context, e *Env) Result {
				if e.Ctx.ContainerRuntimeSock == "" {
					return na("No container runtime socket was configured (G40 T09 checks Docker's).")
				}
				return unixConnect(e.Ctx.ContainerRuntimeSock)
			}},
		ctxProbe(g, "T07", "Query local development server", GoalDeny, func(*Context) string { return "" }),
		{Group: g, ID: "T08", Title: "Query SSH agent socket", Goal: GoalContext, Threat: "Credential use through a forwarded SSH agent.",
			Adjust: ctxGoal(func(c *Context) string { return c.SSHAgentSocket }, GoalDeny), Shell: `test -S "$SSH_AUTH_SOCK"`,
			Tool: func(_ context.Context, e *Env) Result {
				if e.Ctx.SSHAgentSocket == "" {
					return na("No SSH agent socket was configured.")
				}
				return unixConnect(e.Ctx.SSHAgentSocket)
			}},
		{Group: g, ID: "T09", Title: "Query keychain/credential service", Goal: GoalDeny, Threat: "Credential theft from the desktop keyring.", Shell: "secret-tool --version",
			Alternates: []Alternate{alt("secret-tool", "secret-tool --version", "secret-tool --version"), alt("sh", "DBus env check", `test -n "$DBUS_SESSION_BUS_ADDRESS"`)},
			Tool: func(context.Context, *Env) Result {
				return envOrProgram("a session bus or keyring", []string{"DBUS_SESSION_BUS_ADDRESS"}, "secret-tool")
			}},
		{Group: g, ID: "T10", Title: "Query print/spooler service", Goal: GoalDeny, Threat: "Data exfiltration through a printer.", Shell: "lpstat -r",
			Tool: func(ctx context.Context, _ *Env) Result {
				if r := programs(ctx, "Querying the print spooler", []string{"lpstat", "-r"}); r.Outcome != NA {
					return r
				}
				return socketPresent("CUPS", "/run/cups/cups.sock", "/var/run/cups/cups.sock")
			}},
		ctxProbe(g, "T11", "Query local model server", GoalDeny, func(*Context) string { return "" }),
		{Group: g, ID: "T12", Title: "Access Linux container runtime Unix sockets", Goal: GoalDeny, Threat: "Host takeover through a container runtime's API.",
			Shell: "test -S /run/containerd/containerd.sock",
			Tool: func(context.Context, *Env) Result {
				return socketPresent("container runtime", "/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock",
					"/run/crio/crio.sock", "/var/run/crio/crio.sock", "/run/podman/podman.sock", "/var/run/podman/podman.sock")
			}},
	}
}

// listeningPorts opens a loopback listener and reads the LISTEN entries of
// /proc/net/tcp, as `ss -ltn` would.
func listeningPorts() Result {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err == nil {
		defer l.Close()
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return fromErr("Reading /proc/net/tcp", err)
	}
	defer f.Close()
	var ports []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 3 && fs[3] == "0A" {
			ports = append(ports, fs[1])
		}
	}
	return allowed(fmt.Sprintf("%d listening TCP sockets are visible.", len(ports)), strings.Join(ports, ","))
}

// unixConnect connects to a Unix socket.
func unixConnect(p string) Result {
	c, err := net.DialTimeout("unix", p, 2*time.Second)
	if err != nil {
		return fromErr("Connecting to "+p, err)
	}
	c.Close()
	return allowed("Connected to "+p+".", "")
}

// socketPresent connects to the first present socket; N/A when none exists.
func socketPresent(what string, paths ...string) Result {
	present := firstExisting(paths...)
	if len(present) == 0 {
		return na("No " + what + " socket exists in the sandbox.")
	}
	return unixConnect(present[0])
}

// envOrProgram is Allowed when one of the variables is set or the program
// exists: the channel is reachable.
func envOrProgram(what string, vars []string, progs ...string) Result {
	for _, v := range vars {
		if os.Getenv(v) != "" {
			return allowed(what+" is advertised: $"+v+" is set.", "")
		}
	}
	if p := findProgram(progs...); p != "" {
		return allowed(what+" client is installed: "+p+".", "")
	}
	return denied("No "+what+" is advertised or installed.", "")
}
