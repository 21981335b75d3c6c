package dockerx

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// sshHost is the placeholder host an ssh engine's client names: every
// connection goes through the ssh dialer, never to this name.
const sshHost = "http://docker.example.com"

// sshArgs is the ssh command line that reaches the engine named by an
// ssh:// address, as the Docker CLI's connection helper builds it: the
// remote `docker system dial-stdio` joins ssh's stdin and stdout to the
// engine's socket on that host. Only ssh://[user@]host[:port] is
// accepted: a path, query or fragment has no meaning there.
func sshArgs(daemon string) ([]string, error) {
	u, err := url.Parse(daemon)
	if err != nil || u.Scheme != "ssh" || u.Hostname() == "" {
		return nil, fmt.Errorf("DOCKER_HOST %q: not ssh://[user@]host[:port]", daemon)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("DOCKER_HOST %q: an ssh address takes no path, query or fragment", daemon)
	}
	if _, set := u.User.Password(); set {
		return nil, fmt.Errorf("DOCKER_HOST %q: a password in the address is not supported; use an ssh key or agent", daemon)
	}
	if strings.HasPrefix(u.Hostname(), "-") || strings.HasPrefix(u.User.Username(), "-") {
		return nil, fmt.Errorf("DOCKER_HOST %q: a host or user starting with '-' would be read as an ssh option", daemon)
	}
	args := []string{"-o", "ConnectTimeout=30", "-T"}
	if name := u.User.Username(); name != "" {
		args = append(args, "-l", name)
	}
	if p := u.Port(); p != "" {
		args = append(args, "-p", p)
	}
	return append(args, "--", u.Hostname(), "docker", "system", "dial-stdio"), nil
}

// sshDialer returns a dialer whose every connection is a new ssh process
// running args: the connection is its stdin and stdout.
func sshDialer(args []string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		cmd := exec.Command("ssh", args...) // not CommandContext: the connection outlives the dial's ctx
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		c := &cmdConn{cmd: cmd, r: stdout, w: stdin}
		cmd.Stderr = &c.stderr
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting ssh to reach the engine: %w (is the ssh client installed?)", err)
		}
		return c, nil
	}
}

// cmdConn is a net.Conn over a process's stdout (read) and stdin
// (write). Deadlines are not supported (the HTTP client uses its own
// timeouts through the request's context).
type cmdConn struct {
	cmd    *exec.Cmd
	r      io.ReadCloser
	w      io.WriteCloser
	stderr lockedBuffer
	once   sync.Once
}

func (c *cmdConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.EOF && n == 0 {
		if msg := strings.TrimSpace(c.stderr.String()); msg != "" {
			return 0, fmt.Errorf("ssh ended the engine connection: %s", lastLine(msg))
		}
	}
	return n, err
}

func (c *cmdConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// Close ends the ssh process: its stdin closed, it exits; one that has
// not after a second is killed. The process is always waited for.
func (c *cmdConn) Close() error {
	c.once.Do(func() {
		c.w.Close()
		done := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
	})
	return nil
}

func (c *cmdConn) LocalAddr() net.Addr              { return sshAddr{} }
func (c *cmdConn) RemoteAddr() net.Addr             { return sshAddr{} }
func (c *cmdConn) SetDeadline(time.Time) error      { return nil }
func (c *cmdConn) SetReadDeadline(time.Time) error  { return nil }
func (c *cmdConn) SetWriteDeadline(time.Time) error { return nil }

type sshAddr struct{}

func (sshAddr) Network() string { return "ssh" }
func (sshAddr) String() string  { return "ssh" }

// lockedBuffer is a bytes.Buffer safe for the process's writes and our
// reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func lastLine(s string) string {
	i := strings.LastIndexByte(s, '\n')
	return s[i+1:]
}
