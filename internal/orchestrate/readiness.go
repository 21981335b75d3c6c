package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/inside"
)

func (s *Session) awaitReady(ctx context.Context, c *Container, timeout time.Duration) error {
	state := dockerx.ContainerState{Running: true, Pid: c.Pid, IPs: c.IPs}
	if !c.inspected { // a held container was inspected at its release
		var err error
		if state, err = s.inspect(ctx, c); err != nil {
			return err
		}
	}
	if !state.Running || state.Pid == 0 || errors.Is(c.ProcessErr, dockerx.ErrProcessGone) {
		// Exited already: the engine has dropped its addresses.
		code := state.ExitCode
		select {
		case r := <-c.wait:
			code = r.ExitCode
		case <-time.After(2 * time.Second):
		}
		c.ExitCode = &code
		return fmt.Errorf("%s exited with code %d before it was ready", c.Step.Role, code)
	}
	if s.AwaitReady != nil {
		c.ReadyBy = ReadyByHelper
		return s.awaitByHelper(ctx, c, timeout)
	}
	if c.Process == nil {
		// Not proven to be on this host: nothing is asked of the number
		// the engine gave, and its word that the container runs stands.
		c.ReadyBy = ReadyByEngine + ": " + c.ProcessErr.Error()
		return nil
	}
	what, check := s.readiness(c.Step.Ready, c)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	// Checked again after 5 ms, then twice as long each time up to 50 ms:
	// a server is usually ready within tens of milliseconds of its start.
	pause := 5 * time.Millisecond
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		if errors.Is(last, os.ErrPermission) && c.ReadyBy == "" {
			// Not root: the namespace cannot be entered. Watching for
			// the listening socket needs no privilege and sends nothing.
			c.ReadyBy = ReadyByListening
			what, check = "listening socket on port "+strconv.Itoa(c.Step.Ready.Port), func(context.Context) error {
				return listening(c.Process, c.Step.Ready.Port)
			}
			continue
		}
		select {
		case r := <-c.wait:
			code := r.ExitCode
			c.ExitCode = &code
			return fmt.Errorf("%s exited with code %d before it was ready", c.Step.Role, code)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s not ready after %s: %s: %w", c.Step.Role, timeout, what, last)
			}
			return ctx.Err()
		case <-time.After(pause):
			pause = min(2*pause, 50*time.Millisecond)
		}
	}
}

// awaitByHelper waits for s.AwaitReady, or c's exit, or ctx's end.
func (s *Session) awaitByHelper(ctx context.Context, c *Container, timeout time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.AwaitReady(ctx, c, timeout) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s not ready after %s: %w", c.Step.Role, timeout, err)
		}
		return nil
	case r := <-c.wait:
		code := r.ExitCode
		c.ExitCode = &code
		return fmt.Errorf("%s exited with code %d before it was ready", c.Step.Role, code)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// inspect reads c's state; while it runs, its pid and addresses are
// recorded, and each fixed address is checked: the peers' host entries
// name it, so a container elsewhere could not be reached by them.
func (s *Session) inspect(ctx context.Context, c *Container) (dockerx.ContainerState, error) {
	state, err := s.Engine.InspectContainer(ctx, c.ID)
	if err != nil {
		return state, err
	}
	c.Pid, c.IPs = state.Pid, state.IPs
	if !state.Running || state.Pid == 0 {
		return state, nil // exited: the engine has dropped its addresses
	}
	c.inspected = true
	if c.Process == nil && c.ProcessErr == nil {
		c.Process, c.ProcessErr = s.Engine.Process(ctx, c.ID, state)
	}
	for _, a := range c.Step.Spec.Networks {
		if a.IPv4 != "" && state.IPs[a.Network] != a.IPv4 {
			return state, fmt.Errorf("%s has the address %q on network %s, not the planned %s that its peers' host entries name",
				c.Step.Role, state.IPs[a.Network], a.Network, a.IPv4)
		}
	}
	return state, nil
}

// ReadyByListening is recorded in Container.ReadyBy when readiness was
// judged from the container's listening socket instead of a request.
const ReadyByListening = "listening socket (the host may not enter the container's network namespace)"

// ReadyByHelper is recorded in Container.ReadyBy when readiness was
// judged by a helper container in the service's network namespace.
const ReadyByHelper = "helper container in the container's network namespace that asked its own loopback until it answered"

// ReadyByEngine is recorded in Container.ReadyBy, with the reason, when
// the container's init could not be proven to be on this host: the
// service was taken as ready once the engine reported it running.
const ReadyByEngine = "the engine's report that the container runs (the host checked nothing of its process)"

// readiness is the check of r for c: a request to its own loopback from
// inside its init's network namespace.
func (s *Session) readiness(r *Readiness, c *Container) (string, func(context.Context) error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.Port))
	if r.TCP {
		return "TCP connect " + addr + " in the container", func(ctx context.Context) error {
			conn, err := dialNetns(ctx, c.Process, addr)
			if err != nil {
				return err
			}
			return conn.Close()
		}
	}
	url := "http://" + addr + r.Path
	return "GET " + url + " in the container", func(ctx context.Context) error {
		// The process is read here, on the caller's goroutine: the
		// transport may still be dialling after the check returned, when
		// teardown has released it (CloseProcesses; a data race seen
		// under -race).
		p := c.Process
		client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
			Proxy: nil, DisableKeepAlives: true,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dialNetns(ctx, p, addr) },
		}}
		return inside.GetOK(ctx, client, url)
	}
}

// dialNetns is the only way the session connects to a container. Threat:
// the host has no address on the internal network, so a connection to a
// container's address there would leave by the host's default route; the
// guard refuses anything but loopback, which is always the container's
// own inside its namespace.
func dialNetns(ctx context.Context, p dockerx.Process, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("refusing to connect to %s: the host connects to containers only on their own loopback", addr)
	}
	return p.DialInNetns(ctx, addr)
}

func listening(p dockerx.Process, port int) error {
	ok, err := p.Listening(port)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("nothing listens on port %d yet", port)
	}
	return nil
}
