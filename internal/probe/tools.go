//go:build linux

package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/http/httpproxy"

	"github.com/mcpsidecar/mcpsidecar/internal/hold"
)

// ChildSleepFlag is the hidden flag of `mcpsidecar probe` that makes the
// process sleep for the given duration and exit: the child the process
// control probes start, since the image has no other program.
const ChildSleepFlag = "child-sleep"

// readFile attempts to read path.
func readFile(path string) Result {
	data, err := os.ReadFile(path)
	if err != nil {
		return fromErr("Reading "+path, err)
	}
	return allowed("Read "+path+".", fmt.Sprintf("path=%s; bytes=%d", path, len(data)))
}

// listDir attempts to list path.
func listDir(path string) Result {
	ents, err := os.ReadDir(path)
	if err != nil {
		return fromErr("Listing "+path, err)
	}
	names := make([]string, 0, 20)
	for i, e := range ents {
		if i == 20 {
			break
		}
		names = append(names, e.Name())
	}
	return allowed("Listed "+path+".", fmt.Sprintf("path=%s; entries=%d; names=%s", path, len(ents), strings.Join(names, ",")))
}

// firstExisting returns the paths among candidates that exist (stat is not
// governed by Landlock, so this sees what is there, not what is allowed).
func firstExisting(candidates ...string) []string {
	var out []string
	for _, c := range candidates {
		if _, err := os.Lstat(c); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// readAny reads the first readable of paths; N/A when none exists.
func readAny(what string, paths ...string) Result {
	present := firstExisting(paths...)
	if len(present) == 0 {
		return na("No " + what + " exists in the sandbox.")
	}
	var last Result
	for _, p := range present {
		if last = readFile(p); last.Outcome == Allowed {
			return allowed(what+" is readable: "+p+".", last.Evidence)
		}
	}
	return last
}

// globAny is readAny over glob patterns.
func globAny(what string, patterns ...string) Result {
	var paths []string
	for _, p := range patterns {
		m, _ := filepath.Glob(p)
		paths = append(paths, m...)
	}
	if len(paths) == 0 {
		return denied("No "+what+" is visible.", strings.Join(patterns, ","))
	}
	return allowed(fmt.Sprintf("%d %s visible.", len(paths), what), strings.Join(paths, ","))
}

// program attempts to run an external program; N/A when none of the
// candidates is installed (a no-shell image has none).
func program(ctx context.Context, what string, argv ...string) Result {
	p := findProgram(argv[0])
	if p == "" {
		return na(what + ": " + argv[0] + " is not installed.")
	}
	return runCmd(ctx, what, p, argv[1:]...)
}

// programs is program over alternative commands: the first installed wins.
func programs(ctx context.Context, what string, argvs ...[]string) Result {
	var names []string
	for _, a := range argvs {
		if findProgram(a[0]) != "" {
			return program(ctx, what, a...)
		}
		names = append(names, a[0])
	}
	return na(what + ": none of " + strings.Join(names, ", ") + " is installed.")
}

// runCmd runs a program and classifies it: exit 0 Allowed, other exits and
// refused execve Denied.
func runCmd(ctx context.Context, what, path string, args ...string) Result {
	ctx, cancel := context.WithTimeout(ctx, shellTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.WaitDelay = waitDelay
	cmd.Env = childEnv()
	cmd.Cancel = func() error { return syscall.Kill(cmd.Process.Pid, syscall.SIGKILL) }
	start := time.Now()
	out, err := cmd.CombinedOutput()
	ev := fmt.Sprintf("command=%s; duration=%s; err=%v; output=%s", path, time.Since(start).Round(time.Millisecond), err, strings.TrimSpace(string(out)))
	var ee *exec.ExitError
	switch {
	case err == nil:
		return allowed(what+" succeeded.", ev)
	case errors.As(err, &ee):
		return denied(fmt.Sprintf("%s failed (exit %d).", what, ee.ExitCode()), ev)
	}
	return fromErr(what, err)
}

// holdEnv is the harness's start-hold variable (internal/hold): a held
// role waits for a file the harness creates once. A child inheriting it
// would wait for a file that never comes again, so children never get it.
const holdEnv = hold.Env

// childEnv is the environment of every program a probe starts.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, holdEnv+"=") && !strings.HasPrefix(kv, hold.TokenEnv+"=") {
			env = append(env, kv)
		}
	}
	return env
}

// spawnSelf starts this binary with args: the only program a no-shell
// image holds, so the one that tells whether execve is refused.
func (e *Env) spawnSelf(args ...string) (*exec.Cmd, error) {
	if e.Self == "" {
		return nil, errors.New("the probe's own executable path is unknown")
	}
	cmd := exec.Command(e.Self, args...)
	cmd.Env = childEnv()
	return cmd, cmd.Start()
}

// sleeper starts a child that sleeps, for the process control probes.
func (e *Env) sleeper(d time.Duration) (*exec.Cmd, error) {
	return e.spawnSelf("probe", "--"+ChildSleepFlag+"="+d.String())
}

// childLife bounds how long a sleeping child lives, so a child that
// cannot be killed holds the suite back only briefly.
const childLife = 5 * time.Second

// stop kills and reaps a child. kill(2) is the fallback when the pidfd
// path of os.Process fails.
func stop(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	if err := cmd.Process.Kill(); err != nil {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	}
	_ = cmd.Wait()
}

// writeProbe creates and removes a file in dir: can the sandbox write there?
func writeProbe(dir string) error {
	f, err := os.CreateTemp(dir, ".mcpsidecar-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// directRoute judges a direct connection to addr by the routing table
// alone: no packet is sent (the rule: nothing leaves this machine).
func directRoute(addr netip.Addr) Result {
	rs, err := routes()
	if err != nil {
		return fromErr("Reading the routing table", err)
	}
	if r, ok := routeFor(rs, addr); ok {
		return allowed(fmt.Sprintf("Not dialed: a route to %s exists (%s via %s), so a direct connection could leave the sandbox.", addr, r.Prefix, r.Iface), fmt.Sprintf("route=%s; iface=%s", r.Prefix, r.Iface))
	}
	return denied(fmt.Sprintf("No route to %s: a direct connection cannot leave the sandbox.", addr), fmt.Sprintf("routes=%d", len(rs)))
}

// request is one HTTP attempt of a network probe.
type request struct {
	Method string
	URL    string
	Header http.Header
	Body   string
	// Gateway sends through the context's gateway; otherwise the proxy
	// comes from the environment, as the workload's would.
	Gateway bool
}

// fetch makes an HTTP request the way the workload would, without ever
// letting traffic leave the machine: an allowlisted target is not contacted;
// a direct request to an address outside this machine is judged by the
// routing table; a direct request to a real name is not made.
func (e *Env) fetch(ctx context.Context, r request) Result {
	u, err := url.Parse(r.URL)
	if err != nil {
		return errored("The probe URL is malformed.", err.Error())
	}
	host := u.Hostname()
	addr, ipErr := netip.ParseAddr(host)
	if (ipErr == nil && ipAllowed(e.Ctx.AllowedIPs, addr)) || (ipErr != nil && domainAllowed(e.Ctx.AllowedDomains, host)) {
		return na("Not attempted: " + host + " is allowlisted, so the request would leave this machine.")
	}
	proxy, err := e.proxyFor(u, r.Gateway)
	if err != nil {
		return errored("No gateway to send the request through.", err.Error())
	}
	if proxy == nil {
		if ipErr == nil && !localAddr(addr) {
			return directRoute(addr)
		}
		if ipErr != nil && !reservedName(host) {
			return na("Not attempted: a direct request to " + host + " would leave this machine.")
		}
	}
	return doRequest(ctx, r, u, proxy)
}

// proxyFor returns the proxy for u: the context's gateway, or the
// environment's proxy settings (HTTP_PROXY, HTTPS_PROXY, NO_PROXY).
func (e *Env) proxyFor(u *url.URL, gateway bool) (*url.URL, error) {
	if gateway {
		if e.Ctx.GatewayURL == "" {
			return nil, errors.New("the probe context names no gateway")
		}
		return url.Parse(e.Ctx.GatewayURL)
	}
	return httpproxy.FromEnvironment().ProxyFunc()(u)
}

func doRequest(ctx context.Context, r request, u *url.URL, proxy *url.URL) Result {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), strings.NewReader(r.Body))
	if err != nil {
		return errored("Building the request failed.", err.Error())
	}
	for k, v := range r.Header {
		req.Header[k] = v
	}
	tr := &http.Transport{Proxy: http.ProxyURL(proxy), DisableKeepAlives: true}
	if proxy == nil {
		tr.Proxy = nil
	}
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	via := "directly"
	if proxy != nil {
		via = "through " + proxy.Host
	}
	if err != nil {
		return requestErr(u, via, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	ev := fmt.Sprintf("status=%d; via=%s; body=%s", resp.StatusCode, via, strings.TrimSpace(string(body)))
	if resp.StatusCode < 400 {
		return allowed(fmt.Sprintf("%s %s reached %s (status %d).", method, u.Redacted(), via, resp.StatusCode), ev)
	}
	return denied(fmt.Sprintf("%s %s was refused %s (status %d).", method, u.Redacted(), via, resp.StatusCode), ev)
}

// requestErr classifies a failed request: a proxy refusal of CONNECT, a
// name that does not resolve, a refused or timed-out connection are all
// Denied; anything else is an Error.
func requestErr(u *url.URL, via string, err error) Result {
	ev := err.Error()
	var dns *net.DNSError
	switch {
	case strings.Contains(ev, "Forbidden") || strings.Contains(ev, " 403") || strings.Contains(ev, "Bad Gateway"):
		return denied(fmt.Sprintf("The gateway refused %s.", u.Host), ev)
	case errors.As(err, &dns):
		return denied(fmt.Sprintf("%s did not resolve %s.", u.Hostname(), via), ev)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF):
		return denied(fmt.Sprintf("Connecting to %s %s failed.", u.Host, via), ev)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return denied(fmt.Sprintf("Connecting to %s %s was denied by runtime permissions.", u.Host, via), ev)
	}
	return errored(fmt.Sprintf("The request to %s failed unexpectedly.", u.Host), ev)
}

// resolve looks name up through the system resolver. The name is rooted
// (trailing dot) so no search domain turns it into a real name.
func resolve(ctx context.Context, name string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return net.DefaultResolver.LookupHost(ctx, name)
}
