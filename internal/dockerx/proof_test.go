//go:build linux

package dockerx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

const (
	testID  = "4f1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c"
	otherID = "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b"
)

// fakeProc is a /proc root in a test directory; its processes are
// written by add.
type fakeProc struct {
	t    *testing.T
	root procRoot
	boot time.Time
}

func newFakeProc(t *testing.T) *fakeProc {
	boot := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &fakeProc{t: t, boot: boot, root: procRoot{path: t.TempDir(), boot: func() (time.Time, error) { return boot, nil }}}
}

// fakeProcess is what the fake /proc shows of one process.
type fakeProcess struct {
	comm   string
	ppid   int
	flags  uint64
	start  time.Duration // after boot
	nspid  string
	cgroup string
}

func (f *fakeProc) add(pid int, p fakeProcess) {
	dir := filepath.Join(f.root.path, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	stat := fmt.Sprintf("%d (%s) S %d %d %d 0 -1 %d 10 0 0 0 1 1 0 0 20 0 1 0 %d 1000000 100 18446744073709551615\n",
		pid, p.comm, p.ppid, pid, pid, p.flags, uint64(p.start/(10*time.Millisecond)))
	files := map[string]string{"stat": stat, "cgroup": p.cgroup,
		"status": "Name:\t" + p.comm + "\nUid:\t0\t0\t0\t0\nNSpid:\t" + p.nspid + "\n"}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
}

// verify runs the proof of pid against the fake /proc.
func (f *fakeProc) verify(id string, pid int, created time.Time) error {
	read := func(name string) ([]byte, error) {
		return os.ReadFile(filepath.Join(f.root.path, strconv.Itoa(pid), name))
	}
	return f.root.verify(read, id, pid, created)
}

// TestProofWithFakeProc: the proof accepts a container's init under each
// cgroup layout Docker makes, and refuses, with the reason, every process
// the engine's number may name here instead.
func TestProofWithFakeProc(t *testing.T) {
	f := newFakeProc(t)
	created := f.boot.Add(time.Hour)
	init := func(cgroup string) fakeProcess {
		return fakeProcess{comm: "docker-init", ppid: 900, start: time.Hour + 300*time.Millisecond, nspid: "4242\t1", cgroup: cgroup}
	}
	v1 := "12:pids:/docker/" + testID + "\n11:memory:/docker/" + testID + "\n1:name=systemd:/docker/" + testID + "\n0::/system.slice/containerd.service\n"
	for _, tt := range []struct {
		name string
		p    fakeProcess
		want string // "" accepted; else in the error, which wraps ErrNotOnThisHost
	}{
		{"cgroup v1, cgroupfs driver", init(v1), ""},
		{"cgroup v1, systemd driver", init("4:pids:/system.slice/docker-" + testID + ".scope\n1:name=systemd:/system.slice/docker-" + testID + ".scope\n"), ""},
		{"cgroup v2, systemd driver", init("0::/system.slice/docker-" + testID + ".scope\n"), ""},
		{"cgroup v2, cgroupfs driver", init("0::/docker/" + testID + "\n"), ""},
		{"cgroup v2, rootless", init("0::/user.slice/user-1000.slice/user@1000.service/docker.service/docker-" + testID + ".scope\n"), ""},
		{"a command name with parentheses and spaces", func() fakeProcess { p := init(v1); p.comm = "a) (b c"; return p }(), ""},
		{"started within the clock's slack of the creation", func() fakeProcess { p := init(v1); p.start = time.Hour - 500*time.Millisecond; return p }(), ""},
		{"a process of another container", init("12:pids:/docker/" + otherID + "\n0::/system.slice/docker-" + otherID + ".scope\n"), "not in the cgroup of container 4f1c2d3e4f5a"},
		{"a cgroup named by a prefix of the id", init("12:pids:/docker/" + testID[:12] + "\n"), "not in the cgroup"},
		{"a cgroup that only contains the id", init("12:pids:/docker/x" + testID + "\n"), "not in the cgroup"},
		{"a group of a user's own, named after the id", init("0::/user.slice/user-1000.slice/session-3.scope/docker/" + testID + "\n4:pids:/rt2poc/" + testID + "\n"), "not in the cgroup"},
		{"a recycled pid (started before the container was created)",
			func() fakeProcess { p := init(v1); p.start = 59 * time.Minute; return p }(), "before container 4f1c2d3e4f5a was created"},
		{"a kernel thread", fakeProcess{comm: "kworker/0:1", ppid: 2, flags: 0x04208060, start: time.Second, nspid: "77", cgroup: "0::/\n"}, "kernel thread"},
		{"a process of this host's root namespace",
			fakeProcess{comm: "sshd", ppid: 1, flags: 0x400100, start: 2 * time.Hour, nspid: "812", cgroup: "0::/system.slice/ssh.service\n"}, "this host's pid namespace"},
		{"a host process moved into the container's cgroup",
			fakeProcess{comm: "sh", ppid: 1, flags: 0x400100, start: 2 * time.Hour, nspid: "813", cgroup: v1}, "this host's pid namespace"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pid := 5000 + len(tt.name)
			f.add(pid, tt.p)
			err := f.verify(testID, pid, created)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrNotOnThisHost) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrNotOnThisHost with %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), "the engine's process is not on this host") {
				t.Errorf("the reason %q does not say the engine's process is not on this host", err)
			}
		})
	}
	f.add(6000, init(v1))
	if err := f.verify(testID, 6000, time.Time{}); !errors.Is(err, ErrNotOnThisHost) || !strings.Contains(err.Error(), "no creation time") {
		t.Errorf("a container without a creation time: %v, want refused", err)
	}
	if err := f.verify(testID, 31337, created); !errors.Is(err, ErrNotOnThisHost) {
		t.Errorf("a pid the fake /proc does not have: %v, want ErrNotOnThisHost", err)
	}
}

// TestCgroupNames: only a whole path element names the container, and an
// id that could match across elements is refused.
func TestCgroupNames(t *testing.T) {
	for _, tt := range []struct {
		text, id string
		want     bool
	}{
		{"0::/docker/" + testID, testID, true},
		{"3:cpu,cpuacct:/docker/" + testID + "\n", testID, true},
		{"0::/system.slice/docker-" + testID + ".scope", testID, true},
		{"0::/system.slice/docker-" + testID + ".scope/init", testID, true},
		{"0::/docker/" + testID, testID[:12], false},
		{"0::/docker-" + testID + ".scope.bak", testID, false},
		{"0::/", "", false},
		{"0::/docker/a/b", "a/b", false},
		{"docker/" + testID, testID, false}, // not a cgroup line
	} {
		if got := cgroupNames(tt.text, tt.id); got != tt.want {
			t.Errorf("cgroupNames(%q, %q) = %v, want %v", tt.text, tt.id, got, tt.want)
		}
	}
}

// TestProveRefusesThisHost: on the real /proc, nothing of this host is
// proven to be a container's: this process, a kernel thread's number,
// pid 0; a pid no process has is gone.
func TestProveRefusesThisHost(t *testing.T) {
	now := time.Now()
	for _, pid := range []int{os.Getpid(), 1, 2, 0, -1} {
		p, err := Prove(testID, pid, now.Add(-time.Hour))
		if err == nil {
			p.Close()
			t.Errorf("process %d proven to be container %s's", pid, testID[:12])
			continue
		}
		if !errors.Is(err, ErrNotOnThisHost) {
			t.Errorf("process %d: %v, want ErrNotOnThisHost", pid, err)
		}
	}
	if _, err := Prove(testID, 1<<30, now); !errors.Is(err, ErrProcessGone) {
		t.Errorf("a pid no process has: %v, want ErrProcessGone", err)
	}
}

// startChild starts a process that runs until it is killed, and reaps it
// at the end of the test.
func startChild(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting sleep: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// TestHeldProcess: a held process is read through its own /proc
// directory; its end closes WatchExit's channel; once it has ended (a
// zombie: the kernel answers EINVAL for its mountinfo) or been reaped,
// reads fail with ErrProcessGone, never with another process's files;
// once released it is not used.
func TestHeldProcess(t *testing.T) {
	cmd := startChild(t)
	p, err := hostProc.hold(cmd.Process.Pid)
	if err != nil {
		t.Fatalf("holding a child: %v", err)
	}
	defer p.Close()
	if comm, err := p.readFile("comm"); err != nil || strings.TrimSpace(string(comm)) != "sleep" {
		t.Fatalf("comm = %q, %v", comm, err)
	}
	if _, err := p.Mountinfo(); err != nil {
		t.Fatalf("mountinfo: %v", err)
	}
	stop := make(chan struct{})
	defer close(stop)
	done := p.WatchExit(stop)
	if done == nil {
		t.Fatal("not watched")
	}
	select {
	case <-done:
		t.Fatal("the end was reported while the process ran")
	case <-time.After(60 * time.Millisecond):
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the end of the process was not reported")
	}
	if _, err := p.Mountinfo(); !errors.Is(err, ErrProcessGone) {
		t.Errorf("mountinfo of the ended process = %v, want ErrProcessGone", err)
	}
	if _, err := hostProc.hold(cmd.Process.Pid); !errors.Is(err, ErrProcessGone) {
		t.Errorf("holding the ended process = %v, want ErrProcessGone", err)
	}
	cmd.Wait()
	if _, err := p.readFile("status"); !errors.Is(err, ErrProcessGone) {
		t.Errorf("status of the reaped process = %v, want ErrProcessGone", err)
	}
	p.Close()
	if _, err := p.readFile("status"); err == nil || errors.Is(err, ErrProcessGone) {
		t.Errorf("a released process was read: %v", err)
	}
	if p.WatchExit(stop) != nil {
		t.Error("a released process was watched")
	}
}

// TestChildOf: docker-init's child is checked to be its child.
func TestChildOf(t *testing.T) {
	cmd := startChild(t)
	p, err := hostProc.hold(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.childOf(os.Getpid()); err != nil {
		t.Errorf("the child of this process: %v", err)
	}
	if err := p.childOf(1); !errors.Is(err, ErrNotOnThisHost) || !strings.Contains(err.Error(), "not of docker-init") {
		t.Errorf("not the child of process 1: %v", err)
	}
}

// TestLocality: only a unix socket whose server runs in this pid
// namespace is local.
func TestLocality(t *testing.T) {
	ctx := context.Background()
	for _, host := range []string{"tcp://10.0.0.5:2375", "ssh://user@engine", "npipe:////./pipe/docker_engine"} {
		if l := localityOf(ctx, host); l.Local || !strings.Contains(l.Reason, "not a unix socket") {
			t.Errorf("%s: %+v, want not local", host, l)
		}
	}
	missing := filepath.Join(t.TempDir(), "nothing.sock")
	if l := localityOf(ctx, "unix://"+missing); l.Local {
		t.Errorf("a socket nobody serves: %+v, want not local", l)
	}
	sock := filepath.Join(t.TempDir(), "engine.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	l := localityOf(ctx, "unix://"+sock)
	if !l.Local || !strings.Contains(l.Reason, fmt.Sprintf("process %d", os.Getpid())) {
		t.Errorf("a socket this process serves: %+v, want local, served by process %d", l, os.Getpid())
	}
}

// TestHeldProcessNetns: a held process's network namespace (here this
// one's: the child shares it) is read for listening sockets and entered
// for a connection, by its pidfd; without root, entering fails with a
// permission error (readiness then falls back to the listening socket).
func TestHeldProcessNetns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	cmd := startChild(t)
	p, err := hostProc.hold(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if ok, err := p.Listening(port); !ok || err != nil {
		t.Errorf("Listening(%d) = %v, %v, want true", port, ok, err)
	}
	conn, err := p.DialInNetns(context.Background(), ln.Addr().String())
	switch {
	case os.Geteuid() != 0:
		if !errors.Is(err, os.ErrPermission) {
			t.Errorf("DialInNetns without root = %v, want a permission error", err)
		}
	case err != nil:
		t.Errorf("DialInNetns: %v", err)
	default:
		conn.Close()
	}
}

// TestClientLocality: a socket served in this pid namespace is local only
// when the engine behind it reports this host's kernel (a proxy for a
// VM's engine, as Docker Desktop's, does not); the decision is made once.
func TestClientLocality(t *testing.T) {
	here, err := kernelRelease()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		kernel string
		local  bool
		reason string
	}{
		{here, true, "on this host's kernel " + here},
		{"6.10.14-linuxkit", false, `the engine runs kernel "6.10.14-linuxkit"`},
	} {
		t.Run(tt.kernel, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "engine.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			var infos atomic.Int32
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/info") {
					infos.Add(1)
					fmt.Fprintf(w, `{"KernelVersion": %q}`, tt.kernel)
					return
				}
				w.Header().Set("Api-Version", "1.41")
				w.Write([]byte("OK"))
			})}
			go srv.Serve(ln)
			defer srv.Close()
			api, err := client.New(client.WithHost("unix://" + sock))
			if err != nil {
				t.Fatal(err)
			}
			c := &Client{api: api}
			defer c.Close()
			l := c.Locality(context.Background())
			if l.Local != tt.local || !strings.Contains(l.Reason, tt.reason) {
				t.Errorf("Locality = %+v, want local=%v with %q", l, tt.local, tt.reason)
			}
			if again := c.Locality(context.Background()); again != l || infos.Load() != 1 {
				t.Errorf("decided again (%+v, %d info calls), want once", again, infos.Load())
			}
		})
	}
}
