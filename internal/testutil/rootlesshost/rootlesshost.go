//go:build linux

// Package rootlesshost gives a test a rootless Docker engine: a dockerd
// run by a dedicated non-root user (mcpsidecar-rootless) through Debian's
// dockerd-rootless.sh, in rootlesskit's user, mount and network
// namespaces (slirp4netns), its socket under a runtime directory of that
// user. Only test code imports it (the e2e tests, build tag docker); it
// needs root (to make the user, its sub-uid and sub-gid ranges and the
// runtime directory) and Debian's rootlesskit, uidmap and slirp4netns.
//
// Use:
//
//	eng := rootlesshost.Start(t)
//	cmd.Env = append(cmd.Env, eng.Env...) // DOCKER_HOST=unix://…/docker.sock, XDG_RUNTIME_DIR
//	cmd.SysProcAttr = eng.Credential()    // run as the engine's user
//	out := eng.Docker(t, "ps", "-a")      // the docker CLI against that engine
//
// What this machine needs, and [Start] sets up when missing: the user
// with a home; one range of 65536 sub-uids and sub-gids in /etc/subuid
// and /etc/subgid (newuidmap maps the containers' uids there: uid 65532 of
// a role is 231072+65531 on the host); /dev/net/tun usable by the user
// (udev makes it 0666 on a Debian with systemd; a machine without udev
// has it 0600 and slirp4netns fails "open: Permission denied": Start sets
// 0666 and restores the mode after). Nothing is pulled: an image the
// engine needs is built through its API.
//
// Everything is removed by t.Cleanup, registered before it is created: the
// engine's containers, networks and volumes (through the engine), the
// daemon (SIGTERM to rootlesskit, which ends dockerd and containerd; the
// process group killed after 30 s), its data root and runtime directory;
// the cleanup fails the test when a process of the user is still there
// after (and kills it, by its pid).
package rootlesshost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// UserName is the engine's user.
const UserName = "mcpsidecar-rootless"

// subStart and subCount are the user's sub-uid and sub-gid range.
const subStart, subCount = 231072, 65536

// debianScript is Debian docker.io's rootless launcher (Docker's
// docker-ce-rootless-extras puts dockerd-rootless.sh on PATH instead).
const debianScript = "/usr/share/docker.io/contrib/dockerd-rootless.sh"

// launcher finds dockerd-rootless.sh.
func launcher() (string, error) {
	if p, err := exec.LookPath("dockerd-rootless.sh"); err == nil {
		return p, nil
	}
	if _, err := os.Stat(debianScript); err != nil {
		return "", fmt.Errorf("no dockerd-rootless.sh on PATH and %w: install Debian's docker.io (or Docker's docker-ce-rootless-extras)", err)
	}
	return debianScript, nil
}

// Engine is a running rootless engine.
type Engine struct {
	User     *user.User
	UID, GID int
	// Runtime is the engine's XDG_RUNTIME_DIR; Socket its API socket
	// there, Host the DOCKER_HOST for it.
	Runtime, Socket, Host string
	// DataRoot is dockerd's --data-root, in the user's home.
	DataRoot string
	// Env is what a client of the engine needs (DOCKER_HOST,
	// XDG_RUNTIME_DIR, HOME).
	Env []string
	// Log is the daemon's output (rootlesskit, dockerd, containerd).
	Log *bytes.Buffer

	script  string // dockerd-rootless.sh
	cmd     *exec.Cmd
	exited  chan error // the daemon's end, once it answered
	tunMode fs.FileMode
}

// Start makes the user if needed, starts its rootless engine and waits
// until it answers.
func Start(t testing.TB) *Engine {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("rootlesshost: making the rootless engine's user needs root")
	}
	for _, bin := range []string{"rootlesskit", "newuidmap", "newgidmap", "slirp4netns", "dockerd", "docker"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("rootlesshost: %s not found: install Debian's rootlesskit, uidmap, slirp4netns and docker.io (apt-get install rootlesskit uidmap slirp4netns docker.io)", bin)
		}
	}
	script, err := launcher()
	if err != nil {
		t.Fatalf("rootlesshost: %v", err)
	}
	e := &Engine{Log: &bytes.Buffer{}, script: script}
	e.User = ensureUser(t)
	e.UID, _ = strconv.Atoi(e.User.Uid)
	e.GID, _ = strconv.Atoi(e.User.Gid)
	ensureSubIDs(t, "/etc/subuid")
	ensureSubIDs(t, "/etc/subgid")
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	e.Runtime = filepath.Join("/run/user", e.User.Uid, "mcpsidecar-e2e-"+id)
	e.DataRoot = filepath.Join(e.User.HomeDir, ".local/share/docker-e2e-"+id)
	e.Socket = filepath.Join(e.Runtime, "docker.sock")
	e.Host = "unix://" + e.Socket
	e.Env = []string{"DOCKER_HOST=" + e.Host, "XDG_RUNTIME_DIR=" + e.Runtime, "HOME=" + e.User.HomeDir}
	t.Cleanup(func() { e.teardown(t) })
	e.openTun(t)
	// Every directory made here is the user's, ~/.local included: on a
	// new user MkdirAll of ~/.local/share would leave ~/.local root's,
	// mode 0700, and the engine could not reach its data root.
	local := filepath.Join(e.User.HomeDir, ".local")
	for _, d := range []string{filepath.Dir(e.Runtime), e.Runtime, local, filepath.Dir(e.DataRoot), e.DataRoot} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, e.UID, e.GID); err != nil {
			t.Fatal(err)
		}
	}
	e.start(t)
	return e
}

// Credential runs a process as the engine's user (no supplementary group:
// not the docker group).
func (e *Engine) Credential() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(e.UID), Gid: uint32(e.GID), Groups: []uint32{}}}
}

func ensureUser(t testing.TB) *user.User {
	t.Helper()
	u, err := user.Lookup(UserName)
	if err == nil {
		return u
	}
	if out, err := exec.Command("useradd", "--create-home", "--shell", "/usr/sbin/nologin", UserName).CombinedOutput(); err != nil {
		t.Fatalf("rootlesshost: useradd %s: %v: %s", UserName, err, out)
	}
	u, err = user.Lookup(UserName)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// ensureSubIDs gives the user its range in path when it has none.
func ensureSubIDs(t testing.TB, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, UserName+":") {
			return
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s:%d:%d\n", UserName, subStart, subCount); err != nil {
		t.Fatal(err)
	}
}

// openTun lets the user open /dev/net/tun (slirp4netns's tap device), as
// udev does on a Debian with systemd; the mode is restored at teardown.
func (e *Engine) openTun(t testing.TB) {
	t.Helper()
	st, err := os.Stat("/dev/net/tun")
	if err != nil {
		t.Fatalf("rootlesshost: %v: slirp4netns needs the tun device (modprobe tun)", err)
	}
	e.tunMode = st.Mode().Perm()
	if e.tunMode&0o006 != 0o006 {
		if err := os.Chmod("/dev/net/tun", 0o666); err != nil {
			t.Fatal(err)
		}
	}
}

// start runs dockerd-rootless.sh as the user and waits for /_ping.
func (e *Engine) start(t testing.TB) {
	t.Helper()
	e.cmd = exec.Command("sh", e.script, "--data-root", e.DataRoot)
	e.cmd.Dir = e.User.HomeDir
	e.cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "USER=" + UserName}, e.Env...)
	e.cmd.Stdout, e.cmd.Stderr = e.Log, e.Log
	e.cmd.SysProcAttr = e.Credential()
	e.cmd.SysProcAttr.Setpgid = true
	if err := e.cmd.Start(); err != nil {
		t.Fatalf("rootlesshost: starting %s: %v", e.script, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- e.cmd.Wait() }()
	e.exited = exited // teardown stops it, whatever happens below
	deadline := time.After(60 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("rootlesshost: the rootless engine exited (%v) before it answered:\n%s", err, tail(e.Log.String(), 40))
		case <-deadline:
			t.Fatalf("rootlesshost: the rootless engine did not answer on %s in 60 s:\n%s", e.Socket, tail(e.Log.String(), 40))
		case <-time.After(200 * time.Millisecond):
		}
		if out, err := e.DockerErr("version", "--format", "{{.Server.Version}}"); err == nil && out != "" {
			return
		}
	}
}

// Docker runs the docker CLI against the engine and fails the test on error.
func (e *Engine) Docker(t testing.TB, args ...string) string {
	t.Helper()
	out, err := e.DockerErr(args...)
	if err != nil {
		t.Fatalf("docker %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// DockerErr runs the docker CLI against the engine (as root: the socket
// is the user's).
func (e *Engine) DockerErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+e.Host)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
