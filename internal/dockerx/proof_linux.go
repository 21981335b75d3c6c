package dockerx

// This file is the only one that opens /proc/<pid>/ of a process the
// engine named, or enters one's namespace (internal/contract checks it):
// everything else reaches such a process through a [Process] that [Prove]
// returned.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/inside"
	"golang.org/x/sys/unix"
)

// procRoot is a /proc file system: the host's, or a test's fake one.
type procRoot struct {
	path string
	boot func() (time.Time, error) // the wall-clock time the kernel booted
}

var hostProc = procRoot{path: "/proc", boot: bootTime}

// startSlack is how much earlier than the container's creation a process's
// start may seem: the kernel counts it in 10 ms ticks since boot, and the
// wall clock may have been stepped since.
const startSlack = time.Second

// pfKthread is PF_KTHREAD in the flags of /proc/<pid>/stat.
const pfKthread = 0x00200000

// Prove shows that pid, which the engine reported as the init of the
// running container containerID (created at created, by the engine's
// clock, which is this host's when the engine is local), is that
// container's process on this host, and holds it. The process is held (a
// pidfd, and its /proc directory) first and judged after: had the reported
// process ended and its number been taken meanwhile, what is judged is the
// newcomer, which fails. It must not be a kernel thread, must be in a pid
// namespace below this host's (a container's init always is), its cgroup
// must name the container (/docker/<id> or docker-<id>.scope, cgroup v1 or
// v2), and it must not have started before the container was created.
// The error wraps [ErrNotOnThisHost], or [ErrProcessGone] when the process
// had ended.
func Prove(containerID string, pid int, created time.Time) (Process, error) {
	p, err := hostProc.prove(containerID, pid, created)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (r procRoot) prove(id string, pid int, created time.Time) (*hostProcess, error) {
	p, err := r.hold(pid)
	if err != nil {
		return nil, err
	}
	if err := r.verify(p.readFile, id, pid, created); err != nil {
		p.Close()
		return nil, err
	}
	if err := p.ownNamespaces(); err != nil {
		p.Close()
		return nil, err
	}
	p.id, p.created = id, created
	return p, nil
}

// notHere is a failed proof of process pid.
func notHere(pid int, why string) error {
	return fmt.Errorf("%w (process %d %s)", ErrNotOnThisHost, pid, why)
}

func gone(pid int) error { return fmt.Errorf("process %d: %w", pid, ErrProcessGone) }

// hold opens a pidfd on pid, then its /proc directory, and checks the
// process still runs: the directory is then that process's for good (a
// /proc/<pid> directory never turns into another process's).
func (r procRoot) hold(pid int) (*hostProcess, error) {
	if pid <= 0 {
		return nil, notHere(pid, "is not a process id")
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil, gone(pid)
	}
	if err != nil {
		return nil, notHere(pid, fmt.Sprintf("cannot be held: pidfd_open: %v (Linux 5.3 or later)", err))
	}
	dir, err := unix.Open(filepath.Join(r.path, strconv.Itoa(pid)), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		ended := hasEnded(fd)
		unix.Close(fd)
		if ended {
			return nil, gone(pid)
		}
		return nil, notHere(pid, fmt.Sprintf("is not in %s: %v", r.path, err))
	}
	p := &hostProcess{pid: pid, pidfd: fd, dir: dir}
	if p.ended() {
		p.Close()
		return nil, gone(pid)
	}
	return p, nil
}

// verify judges process pid from its /proc files, read by read.
func (r procRoot) verify(read func(string) ([]byte, error), id string, pid int, created time.Time) error {
	stat, err := read("stat")
	if err != nil {
		return readFailed(pid, "stat", err)
	}
	st, err := parseStat(string(stat))
	if err != nil {
		return notHere(pid, err.Error())
	}
	if st.flags&pfKthread != 0 {
		return notHere(pid, "is a kernel thread")
	}
	status, err := read("status")
	if err != nil {
		return readFailed(pid, "status", err)
	}
	if nspid := statusField(string(status), "NSpid"); len(nspid) < 2 {
		return notHere(pid, "runs in this host's pid namespace, not a container's")
	}
	cg, err := read("cgroup")
	if err != nil {
		return readFailed(pid, "cgroup", err)
	}
	if !cgroupNames(string(cg), id) {
		return notHere(pid, "is not in the cgroup of container "+shortID(id))
	}
	if created.IsZero() {
		return notHere(pid, "cannot be dated against its container: the engine gave no creation time")
	}
	boot, err := r.boot()
	if err != nil {
		return notHere(pid, "has no known start time: "+err.Error())
	}
	if start := boot.Add(time.Duration(st.startTicks) * 10 * time.Millisecond); start.Add(startSlack).Before(created) {
		return notHere(pid, fmt.Sprintf("started at %s, before container %s was created at %s: the number is another process's",
			start.UTC().Format(time.RFC3339Nano), shortID(id), created.UTC().Format(time.RFC3339Nano)))
	}
	return nil
}

func readFailed(pid int, name string, err error) error {
	if errors.Is(err, ErrProcessGone) {
		return err
	}
	return notHere(pid, fmt.Sprintf("cannot be read (%s): %v", name, err))
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// procStat is what the proof reads of /proc/<pid>/stat.
type procStat struct {
	ppid       int
	flags      uint64
	startTicks uint64 // since boot, in USER_HZ (100) ticks
}

// parseStat reads /proc/<pid>/stat (proc(5)); the command name, in
// parentheses, may hold spaces and parentheses, so fields are counted
// from the last ')'.
func parseStat(text string) (procStat, error) {
	i := strings.LastIndexByte(text, ')')
	if i < 0 {
		return procStat{}, errors.New("has an unreadable stat")
	}
	f := strings.Fields(text[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return procStat{}, errors.New("has a short stat")
	}
	var st procStat
	var err error
	if st.ppid, err = strconv.Atoi(f[1]); err != nil {
		return st, fmt.Errorf("has an unreadable parent in its stat: %w", err)
	}
	if st.flags, err = strconv.ParseUint(f[6], 10, 64); err != nil {
		return st, fmt.Errorf("has unreadable flags in its stat: %w", err)
	}
	if st.startTicks, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return st, fmt.Errorf("has an unreadable start time in its stat: %w", err)
	}
	return st, nil
}

// statusField is the fields of the "key:" line of a /proc/<pid>/status.
func statusField(text, key string) []string {
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			return strings.Fields(v)
		}
	}
	return nil
}

// cgroupNames reports whether a /proc/<pid>/cgroup text puts the process
// in container id's cgroup, in any hierarchy (v1 lines
// "N:controllers:/path", the v2 line "0::/path"), where Docker puts it:
// /docker/<id> (its cgroupfs driver), /system.slice/docker-<id>.scope
// (its systemd driver), or a docker-<id>.scope under a user's systemd
// service (rootless), each possibly with sub-groups the container made.
// The path is anchored at the root: only root creates /docker or
// /system.slice groups, while a user with a delegated subtree can name a
// group of their own after any id (red team, issue 32). A prefix of the
// id is not enough.
func cgroupNames(text, id string) bool {
	if len(id) < 12 || strings.ContainsAny(id, "/.:\n") {
		return false
	}
	scope := "docker-" + id + ".scope"
	under := func(path, group string) bool { return path == group || strings.HasPrefix(path, group+"/") }
	for _, line := range strings.Split(text, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		path := parts[2]
		switch {
		case under(path, "/docker/"+id), under(path, "/system.slice/"+scope):
			return true
		case strings.HasPrefix(path, "/user.slice/user-") && strings.Contains(path, ".service/"):
			for _, el := range strings.Split(path, "/") {
				if el == scope {
					return true
				}
			}
		}
	}
	return false
}

// bootTime is the wall-clock time of the kernel's boot, as precise as the
// clocks are (/proc/stat's btime is whole seconds).
func bootTime() (time.Time, error) {
	var ts unix.Timespec
	now := time.Now()
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return time.Time{}, fmt.Errorf("reading CLOCK_BOOTTIME: %w", err)
	}
	return now.Add(-time.Duration(ts.Nano())), nil
}

// hostProcess is a proven process: its pidfd and its /proc directory.
type hostProcess struct {
	pid     int
	id      string    // the container's
	created time.Time // the container's
	// mu is held for reading by every use of the descriptors, and for
	// writing by Close, so none is used after it is closed (or reused).
	mu     sync.RWMutex
	pidfd  int
	dir    int
	closed bool
}

var _ Process = (*hostProcess)(nil)

func (p *hostProcess) Pid() int { return p.pid }

// Close releases the pidfd and the directory.
func (p *hostProcess) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	return errors.Join(unix.Close(p.pidfd), unix.Close(p.dir))
}

// use runs f with the descriptors, unless the process was closed.
func (p *hostProcess) use(f func() error) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return fmt.Errorf("process %d: already released", p.pid)
	}
	return f()
}

// ended reports whether the process has ended (its pidfd is readable).
func (p *hostProcess) ended() bool { return hasEnded(p.pidfd) }

// exitWindow is how long a process whose namespaces are gone may take to
// be seen ended through its pidfd (found with 32 concurrent doctors: an
// agent that ended while it was proven was taken for another host's).
const exitWindow = 200 * time.Millisecond

// endedWithin reports whether the pidfd's process ends within d.
func endedWithin(pidfd int, d time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(d/time.Millisecond))
	return err == nil && n > 0
}

func hasEnded(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// readFile reads /proc/<pid>/name through the held directory: the file
// is this process's, or cannot be opened (the process ended: then the
// error wraps [ErrProcessGone]).
func (p *hostProcess) readFile(name string) ([]byte, error) {
	var data []byte
	err := p.use(func() error {
		fd, err := unix.Openat(p.dir, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return p.readErr(name, err)
		}
		f := os.NewFile(uintptr(fd), filepath.Join("/proc", strconv.Itoa(p.pid), name))
		defer f.Close()
		if data, err = io.ReadAll(f); err != nil {
			return p.readErr(name, err)
		}
		return nil
	})
	return data, err
}

func (p *hostProcess) readErr(name string, err error) error {
	if p.ended() {
		return fmt.Errorf("reading %s of process %d: %w", name, p.pid, ErrProcessGone)
	}
	return fmt.Errorf("reading %s of process %d: %w", name, p.pid, err)
}

// Mountinfo reads the process's /proc/<pid>/mountinfo.
func (p *hostProcess) Mountinfo() ([]byte, error) { return p.readFile("mountinfo") }

// enterNetns moves the calling thread, locked to its goroutine and never
// unlocked (the runtime discards it), into the process's network
// namespace: by its pidfd (Linux 5.8 or later), else by its ns/net file,
// opened through the held /proc directory.
func (p *hostProcess) enterNetns() error {
	return p.use(func() error {
		err := unix.Setns(p.pidfd, unix.CLONE_NEWNET)
		if !errors.Is(err, unix.EINVAL) {
			return wrapSetns(p.pid, err)
		}
		ns, err := unix.Openat(p.dir, "ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return p.readErr("ns/net", err)
		}
		defer unix.Close(ns)
		return wrapSetns(p.pid, unix.Setns(ns, unix.CLONE_NEWNET))
	})
}

func wrapSetns(pid int, err error) error {
	if err != nil {
		return fmt.Errorf("entering the network namespace of process %d: %w", pid, err)
	}
	return nil
}

// WatchExit returns a channel closed once the process has ended: the
// kernel's word, which comes before the engine has noticed the exit and
// reported it. Closing stop ends the watch; so does releasing the
// process. nil: the process cannot be watched (released).
func (p *hostProcess) WatchExit(stop <-chan struct{}) <-chan struct{} {
	var fd int
	if err := p.use(func() (err error) {
		fd, err = unix.FcntlInt(uintptr(p.pidfd), unix.F_DUPFD_CLOEXEC, 0)
		return err
	}); err != nil {
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, 50)
			if err != nil && err != unix.EINTR {
				return // cannot say: the engine's report stands
			}
			if n > 0 && fds[0].Revents != 0 {
				close(done)
				return
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	return done
}

// RoleStatus reads the status of the container's processes: this one,
// or the child of docker-init, and every process below it (under the
// launcher, the supervisor and the stage that executes the workload),
// each proven to be the child of its parent; it returns the weakest
// (inside.Weakest), so a check judges the least hardened.
func (p *hostProcess) RoleStatus() (ProcStatus, error) {
	comm, err := p.readFile("comm")
	if err != nil {
		return ProcStatus{}, err
	}
	if strings.TrimSpace(string(comm)) != "docker-init" {
		return p.treeStatus(0)
	}
	child, err := p.child()
	if err != nil {
		return ProcStatus{}, err
	}
	defer child.Close()
	return child.treeStatus(0)
}

// maxTreeDepth bounds how deep treeStatus follows children.
const maxTreeDepth = 8

// treeStatus is the weakest status of p and of every descendant, each
// proven to be its parent's child (a child that ended meanwhile is
// skipped: it holds nothing any more).
func (p *hostProcess) treeStatus(depth int) (ProcStatus, error) {
	st, err := p.status()
	if err != nil {
		return ProcStatus{}, err
	}
	if depth >= maxTreeDepth {
		return st, fmt.Errorf("process %d: more than %d levels of children", p.pid, maxTreeDepth)
	}
	pids, err := p.childPids()
	if err != nil {
		return ProcStatus{}, err
	}
	all := []ProcStatus{st}
	for _, pid := range pids {
		c, err := hostProc.prove(p.id, pid, p.created)
		if errors.Is(err, ErrProcessGone) {
			continue
		}
		if err != nil {
			return ProcStatus{}, err
		}
		if err := c.childOf(p.pid); err != nil {
			c.Close()
			return ProcStatus{}, err
		}
		cst, err := c.treeStatus(depth + 1)
		c.Close()
		if errors.Is(err, ErrProcessGone) {
			continue
		}
		if err != nil {
			return ProcStatus{}, err
		}
		all = append(all, cst)
	}
	return inside.Weakest(all...), nil
}

// childPids lists the children of every thread of p (a Go program
// starts a child from whichever thread runs the call).
func (p *hostProcess) childPids() ([]int, error) {
	var tids []string
	err := p.use(func() error {
		fd, err := unix.Openat(p.dir, "task", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return p.readErr("task", err)
		}
		d := os.NewFile(uintptr(fd), "task")
		defer d.Close()
		tids, err = d.Readdirnames(-1)
		return err
	})
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, tid := range tids {
		data, err := p.readFile("task/" + tid + "/children")
		if err != nil {
			continue // the thread ended since the listing
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}

func (p *hostProcess) status() (ProcStatus, error) {
	data, err := p.readFile("status")
	if err != nil {
		return ProcStatus{}, err
	}
	return parseProcStatus(string(data))
}

// child proves and holds docker-init's one child.
func (p *hostProcess) child() (*hostProcess, error) {
	data, err := p.readFile(fmt.Sprintf("task/%d/children", p.pid))
	if err != nil {
		return nil, fmt.Errorf("finding the child of docker-init: %w", err)
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return nil, fmt.Errorf("docker-init (process %d) has no child yet", p.pid)
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return nil, fmt.Errorf("reading the child of docker-init: %w", err)
	}
	c, err := hostProc.prove(p.id, pid, p.created)
	if err != nil {
		return nil, err
	}
	if err := c.childOf(p.pid); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (p *hostProcess) childOf(parent int) error {
	stat, err := p.readFile("stat")
	if err != nil {
		return err
	}
	st, err := parseStat(string(stat))
	if err != nil {
		return notHere(p.pid, err.Error())
	}
	if st.ppid != parent {
		return notHere(p.pid, fmt.Sprintf("is the child of process %d, not of docker-init (process %d)", st.ppid, parent))
	}
	return nil
}

// localityOf decides whether the engine behind host (its API address,
// DOCKER_HOST's form) is local: a unix socket whose server (SO_PEERCRED:
// the process that listens, 0 when it is outside this pid namespace) runs
// in this pid namespace (its NSpid has one level), the one this /proc
// shows.
func localityOf(ctx context.Context, host string) Locality {
	path, ok := strings.CutPrefix(host, "unix://")
	if !ok {
		return Locality{Reason: "the engine's API is " + host + ", not a unix socket on this host"}
	}
	pid, err := peerPid(ctx, path)
	if err != nil {
		return Locality{Reason: fmt.Sprintf("the engine's socket %s: %v", path, err)}
	}
	if pid == 0 {
		return Locality{Reason: "the daemon behind " + path + " runs in another pid namespace than this host's"}
	}
	if self, err := os.Readlink(filepath.Join(hostProc.path, "self")); err != nil || self != strconv.Itoa(os.Getpid()) {
		return Locality{Reason: "this process's /proc is not of its own pid namespace"}
	}
	status, err := os.ReadFile(filepath.Join(hostProc.path, strconv.Itoa(pid), "status"))
	if err != nil {
		return Locality{Reason: fmt.Sprintf("the daemon behind %s (process %d) cannot be read: %v", path, pid, err)}
	}
	if n := len(statusField(string(status), "NSpid")); n != 1 {
		return Locality{Reason: fmt.Sprintf("the daemon behind %s (process %d) runs in a pid namespace below this host's", path, pid)}
	}
	return Locality{Local: true, Reason: fmt.Sprintf("%s is served by process %d in this host's pid namespace", path, pid)}
}

// kernelRelease is this host's kernel release (uname -r).
func kernelRelease() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", fmt.Errorf("reading this host's kernel release: %w", err)
	}
	return unix.ByteSliceToString(u.Release[:]), nil
}

// peerPid is the pid SO_PEERCRED gives for the server of the unix socket
// at path.
func peerPid(ctx context.Context, path string) (int, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	raw, err := conn.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, fmt.Errorf("reading SO_PEERCRED: %w", credErr)
	}
	return int(cred.Pid), nil
}

// ownNamespaces checks that the held process is in network and mount
// namespaces of its own, not this host's: a container's always are, and
// a process in this host's network namespace is never one the host may
// enter to drop routes or dial (red team, issue 32: a process in a child
// pid namespace of its own, in a cgroup named after the container).
func (p *hostProcess) ownNamespaces() error {
	for _, ns := range []string{"net", "mnt"} {
		var theirs unix.Stat_t
		if err := unix.Fstatat(p.dir, "ns/"+ns, &theirs, 0); err != nil {
			// A process on its way out has released its namespaces before
			// its pidfd says it ended (the kernel does both in do_exit, in
			// that order): wait a little for the end before deciding.
			if endedWithin(p.pidfd, exitWindow) {
				return gone(p.pid) // it exited meanwhile: its namespaces are gone with it
			}
			return notHere(p.pid, fmt.Sprintf("has a %s namespace that cannot be read: %v", ns, err))
		}
		ours, err := hostNamespace(ns)
		if err != nil {
			return notHere(p.pid, fmt.Sprintf("cannot be compared with this host's %s namespace: %v", ns, err))
		}
		if theirs.Dev == ours.Dev && theirs.Ino == ours.Ino {
			return notHere(p.pid, "shares this host's "+ns+" namespace: it is not a container's process")
		}
	}
	return nil
}

// hostNamespaces are this process's network and mount namespaces as they
// were when it started: read once, before any thread entered a
// container's namespace (readiness and the route removal do, on a locked
// thread, which may be the one /proc/self names), so that a comparison
// never takes a container's namespace for this host's.
var hostNamespaces = func() map[string]nsID {
	m := map[string]nsID{}
	for _, ns := range []string{"net", "mnt"} {
		var st unix.Stat_t
		if err := unix.Stat("/proc/thread-self/ns/"+ns, &st); err == nil {
			m[ns] = nsID{Dev: st.Dev, Ino: st.Ino}
		}
	}
	return m
}()

type nsID struct{ Dev, Ino uint64 }

func hostNamespace(ns string) (nsID, error) {
	id, ok := hostNamespaces[ns]
	if !ok {
		return nsID{}, errors.New("it could not be read when the program started")
	}
	return id, nil
}
