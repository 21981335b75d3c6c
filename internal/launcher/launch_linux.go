//go:build linux

package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/hold"
	"github.com/mcpsidecar/mcpsidecar/internal/noexec"
)

// envStage marks the second stage: the child the supervisor starts, which
// hardens itself and executes the workload. Its value is the number of
// the inherited descriptor the child sends its notification fd over.
const envStage = EnvStage

// internalEnv are the launcher's own variables, removed from the
// workload's environment; the start hold's too (the launcher holds, once).
var internalEnv = []string{EnvStage, EnvShellAccess, EnvSelf, EnvExecAccepted, hold.Env, hold.TokenEnv}

// Options are a launch: the command, the environment, where the harden
// report goes.
type Options struct {
	// Context ends when the launcher is stopped (SIGTERM): a launcher
	// held at start (internal/hold) then returns at once. Nil: never.
	Context   context.Context
	Argv      []string
	Environ   []string // the launcher's environment (os.Environ())
	Stderr    io.Writer
	ReportDir string // harden-report.json goes here ("" for none)
	// Apply is harden.Apply; tests replace it to apply nothing.
	Apply func(harden.Policy) (harden.Report, error)
	// ApplySeccomp is harden.ApplySeccomp (the supervisor's filter).
	ApplySeccomp func(harden.Policy) (harden.Report, error)
	// finish runs after a successful Apply, before the report is written.
	finish func(*harden.Report) error
	// checkNoexec is noexec.Check; tests replace it.
	checkNoexec func(path string) error
	// mountinfo reads /proc/self/mountinfo; tests replace it.
	mountinfo func() (string, error)
	// notes are degradations found before Apply, added to the report.
	notes []string
	// limited is the resource limits' layer, set before Apply (see
	// setRlimits), added to the report.
	limited *harden.LayerStatus
}

func getenvFrom(env []string) func(string) string {
	return func(k string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], k+"="); ok {
				return v
			}
		}
		return ""
	}
}

// Launch runs the workload. Without shell_access it is the supervisor:
// it starts the second stage, answers its first execve (the workload's
// own) and refuses every later one, then waits and returns the
// workload's exit status as an *ExitError (nil for 0). With shell_access
// it hardens the calling process and executes the command in place, and
// returns only on failure.
func Launch(o Options) error {
	if o.Apply == nil {
		o.Apply = harden.Apply
	}
	if o.ApplySeccomp == nil {
		o.ApplySeccomp = harden.ApplySeccomp
	}
	getenv := getenvFrom(o.Environ)
	if fdStr := getenv(envStage); fdStr != "" {
		return stageTwo(o, getenv, fdStr)
	}
	planned, err := plan(&o, getenv)
	if err != nil {
		return err
	}
	if getenv(EnvShellAccess) == "1" {
		if err := applyAndReport(o, planned.Policy); err != nil {
			return err
		}
		return execWorkload(o.ctx(), planned, o.Environ)
	}
	return supervise(o, planned)
}

func plan(o *Options, getenv func(string) string) (Planned, error) {
	// The harness always says; a missing or odd value (an image's own
	// ENV cannot set it: the harness's value overrides) is refused.
	if v := getenv(EnvShellAccess); v != "0" && v != "1" {
		return Planned{}, &ExitError{Code: ExitUsage, Err: fmt.Errorf("launch: %s=%q: want 0 or 1, set by the harness", EnvShellAccess, v)}
	}
	base, ok, err := harden.PolicyFromEnv(getenv)
	if err != nil {
		return Planned{}, &ExitError{Code: ExitUsage, Err: err}
	}
	if !ok {
		return Planned{}, &ExitError{Code: ExitUsage, Err: fmt.Errorf("launch: %s is not set; refusing to run a workload unhardened", harden.EnvPolicy)}
	}
	if err := setRlimits(o, getenv); err != nil {
		return Planned{}, err
	}
	pathEnv := getenv("PATH")
	planned, err := Plan(Input{Base: *base, Argv: o.Argv, ShellAccess: getenv(EnvShellAccess) == "1",
		Root: "/", PathEnv: pathEnv, Self: getenv(EnvSelf)})
	if err != nil {
		return Planned{}, &ExitError{Code: ExitUsage, Err: fmt.Errorf("launch: %w", err)}
	}
	if err := checkWritable(o, planned.Policy, getenv(EnvExecAccepted)); err != nil {
		return Planned{}, err
	}
	return planned, nil
}

// checkWritable makes sure every directory the workload may write is on a
// noexec mount before anything runs (statfs, the kernel's own answer),
// and that every mount it can write through, at or below each writable
// path, is noexec, nosuid and nodev (checkWritableMounts).
// Threat: a native library written there and mapped executable
// in-process; Landlock's execute right does not see mmap. The tmpfs
// mounts are noexec by their options, the output directory by the host's
// mount (internal/noexec); a path that is not stops the launch, as a
// layer the kernel cannot enforce does, unless the harness says the user
// accepted it (then it is a degradation in the report).
func checkWritable(o *Options, p harden.Policy, accepted string) error {
	check := o.checkNoexec
	if check == nil {
		check = noexec.Check
	}
	for _, dir := range p.Landlock.ReadWriteDirs {
		err := check(dir)
		var ne *noexec.NotNoexecError
		switch {
		case err == nil:
		case errors.As(err, &ne) && accepted != "" && dir == accepted:
			o.notes = append(o.notes, fmt.Sprintf("%s is not noexec: a file the workload writes there can be mapped executable in-process (accepted by the harness: %s)", dir, EnvExecAccepted))
		case errors.As(err, &ne):
			return &ExitError{Code: ExitUnavailable, Err: fmt.Errorf("launch: writable path %w; a layer the kernel cannot enforce stops the run", err)}
		default:
			return &ExitError{Code: ExitUnavailable, Err: fmt.Errorf("launch: checking that writable path %s is noexec: %w", dir, err)}
		}
	}
	return checkWritableMounts(o, p, accepted)
}

// checkWritableMounts walks the mount table: every mount at or below each
// writable directory (and the one holding it), and the mount holding each
// writable file that is not a device, must be noexec, nosuid and nodev.
// Threat: a mount the policy does not name, such as an image VOLUME at
// /tmp/v (redteam2 finding 1), which a statfs of /tmp never sees: host
// disk, writable and executable. The mount holding the path the harness
// accepted as not noexec is the one exception; a mount below it is not.
func checkWritableMounts(o *Options, p harden.Policy, accepted string) error {
	read := o.mountinfo
	if read == nil {
		read = func() (string, error) {
			b, err := os.ReadFile("/proc/self/mountinfo")
			return string(b), err
		}
	}
	data, err := read()
	var ms []noexec.MountPoint
	if err == nil {
		ms, err = noexec.ParseMountinfo(data)
	}
	if err != nil {
		return &ExitError{Code: ExitUnavailable, Err: fmt.Errorf("launch: reading this container's mounts (/proc/self/mountinfo) to check its writable paths: %w", err)}
	}
	paths := slices.Clone(p.Landlock.ReadWriteDirs)
	for _, f := range p.Landlock.ReadWriteFiles {
		// Writing a device stores no file to map: /dev/null.
		if fi, err := os.Stat(f); err != nil || fi.Mode()&(os.ModeDevice|os.ModeCharDevice) == 0 {
			paths = append(paths, f)
		}
	}
	var errs []string
	for _, path := range paths {
		resolved := path
		if r, err := filepath.EvalSymlinks(path); err == nil {
			resolved = r // the table names real paths
		}
		for _, pr := range writableMountProblems(ms, resolved) {
			if pr.Holding && accepted != "" && path == accepted {
				continue // recorded as a degradation by checkWritable
			}
			pr.Path = path
			errs = append(errs, pr.Error())
		}
	}
	if len(errs) > 0 {
		return &ExitError{Code: ExitUnavailable, Err: fmt.Errorf("launch: %s; a writable mount the kernel lets run code from stops the run (an image VOLUME? rebuild the image without it)", strings.Join(errs, "; "))}
	}
	return nil
}

// setRlimits sets the resource limits in harden.EnvRlimits (a pod's,
// which takes no ulimits) on the launcher. The second stage inherits
// them and sets them again (the same values: a no-op); the workload's
// execve keeps them.
func setRlimits(o *Options, getenv func(string) string) error {
	limits, err := harden.RlimitsFromEnv(getenv)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("launch: %w", err)}
	}
	if len(limits) == 0 {
		return nil
	}
	st, err := harden.ApplyRlimits(limits)
	if err != nil {
		return &ExitError{Code: ExitLaunch, Err: fmt.Errorf("launch: %w", err)}
	}
	o.limited = &st
	return nil
}

func applyAndReport(o Options, p harden.Policy) error {
	rep, err := o.Apply(p)
	if err == nil && o.finish != nil {
		err = o.finish(&rep)
	}
	if o.limited != nil {
		rep.Layers = append(rep.Layers, *o.limited)
	}
	rep.Degradations = append(rep.Degradations, o.notes...)
	if o.ReportDir != "" {
		if werr := harden.WriteReport(o.ReportDir, rep); werr != nil {
			fmt.Fprintf(o.Stderr, "mcpsidecar launch: %v\n", werr)
		}
	}
	for _, d := range rep.Degradations {
		fmt.Fprintf(o.Stderr, "mcpsidecar launch: hardening degraded: %s\n", d)
	}
	var ue *harden.UnavailableError
	if errors.As(err, &ue) {
		return &ExitError{Code: ExitUnavailable, Err: fmt.Errorf("launch: %w", err)}
	}
	if err != nil {
		return &ExitError{Code: ExitLaunch, Err: fmt.Errorf("launch: hardening the workload: %w", err)}
	}
	return nil
}

// ctx is o.Context, or one that never ends.
func (o Options) ctx() context.Context {
	if o.Context == nil {
		return context.Background()
	}
	return o.Context
}

// workloadEnv is the environment without the launcher's own variables.
func workloadEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(internalEnv, k)
	})
}

// execWorkload waits for the start hold, if any (internal/hold: the
// harness reads the hardening from outside while the launcher waits,
// hardened, with its report written), then executes the workload.
func execWorkload(ctx context.Context, p Planned, env []string) error {
	getenv := getenvFrom(env)
	if err := hold.Wait(ctx, getenv(hold.Env), getenv(hold.TokenEnv), hold.Timeout); err != nil {
		return &ExitError{Code: ExitLaunch, Err: fmt.Errorf("launch: %w", err)}
	}
	err := syscall.Exec(p.Program, p.Argv, workloadEnv(env))
	return &ExitError{Code: ExitLaunch, Err: fmt.Errorf("launch: executing %s: %w", p.Program, err)}
}

// supervise starts the second stage with one end of a socket pair, takes
// its seccomp notification descriptor, and answers execve notifications
// until the child exits.
func supervise(o Options, planned Planned) error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return &ExitError{Code: ExitLaunch, Err: fmt.Errorf("launch: socketpair: %w", err)}
	}
	parent, child := os.NewFile(uintptr(fds[0]), "launch-parent"), os.NewFile(uintptr(fds[1]), "launch-child")
	defer parent.Close()
	self, err := os.Executable()
	if err != nil {
		child.Close()
		return &ExitError{Code: ExitLaunch, Err: fmt.Errorf("launch: finding the launcher: %w", err)}
	}
	cmd := exec.Command(self, append([]string{"launch", "--"}, o.Argv...)...)
	cmd.Args[0] = "mcpsidecar"
	cmd.Env = append(slices.Clone(o.Environ), envStage+"=3")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{child}
	if err := cmd.Start(); err != nil {
		child.Close()
		return &ExitError{Code: ExitLaunch, Err: fmt.Errorf("launch: starting the workload: %w", err)}
	}
	child.Close()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	listener, err := recvFD(parent)
	if err != nil {
		// The child failed before it could send it (its own error is on
		// stderr) or never got there.
		waitErr := cmd.Wait()
		if code := exitCode(waitErr); code != 0 {
			return &ExitError{Code: code}
		}
		return &ExitError{Code: ExitLaunch, Err: fmt.Errorf("launch: the workload stage sent no notification descriptor: %w", err)}
	}
	// The supervisor runs no workload code. It takes the seccomp filter
	// (no program, no socket, no listen, the baseline) but no Landlock
	// domain: one of its own would scope its signals away from the child
	// it must forward SIGTERM to. The workload cannot reach it: ptrace
	// and process_vm_* are refused by the seccomp baseline, signals to it
	// by the workload's Landlock scope.
	if _, err := o.ApplySeccomp(supervisorPolicy(planned.Policy)); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return &ExitError{Code: ExitUnavailable, Err: fmt.Errorf("launch: hardening the supervisor: %w", err)}
	}
	go answerExecs(listener, o.Stderr) // before the ack: the child's execve follows it
	if _, err := parent.Write([]byte{1}); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return &ExitError{Code: ExitLaunch, Err: fmt.Errorf("launch: confirming to the workload stage: %w", err)}
	}
	if code := exitCode(cmd.Wait()); code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// supervisorPolicy is the supervisor's seccomp filter: nothing to start,
// no socket of any kind, no listen (it already holds its descriptors).
func supervisorPolicy(w harden.Policy) harden.Policy {
	return harden.Policy{Schema: harden.Schema, Role: "launcher",
		Landlock: harden.Landlock{MinABI: w.Landlock.MinABI, ReadOnlyDirs: []string{}, ReadOnlyFiles: []string{},
			ReadWriteDirs: []string{}, ReadWriteFiles: []string{}, ConnectTCP: []uint16{}, BindTCP: []uint16{}},
		NoSpawn: true, DenyUnixSockets: true, NoListen: true, NoUDP: true, NoNetlink: true}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return ExitLaunch
}

// seccomp_notif and seccomp_notif_resp (linux/seccomp.h).
type seccompNotif struct {
	ID    uint64
	PID   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// answerExecs lets the first execve through (the workload's own, issued
// by our second stage before any workload code ran) and refuses every
// later one with EPERM, whichever process or thread of the workload asks.
func answerExecs(fd int, stderr io.Writer) {
	first := true
	for {
		var n seccompNotif
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(unix.SECCOMP_IOCTL_NOTIF_RECV), uintptr(unsafe.Pointer(&n))); e != 0 {
			if e == unix.EINTR || e == unix.ENOENT {
				continue
			}
			return // the workload is gone
		}
		resp := seccompNotifResp{ID: n.ID}
		if first {
			resp.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
			first = false
		} else {
			resp.Error = -int32(unix.EPERM)
			fmt.Fprintf(stderr, "mcpsidecar launch: refused a program start by pid %d: the workload may run only its own command (no shell_access)\n", n.PID)
		}
		unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(unix.SECCOMP_IOCTL_NOTIF_SEND), uintptr(unsafe.Pointer(&resp)))
	}
}

func recvFD(sock *os.File) (int, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return -1, err
	}
	if n == 0 && oobn == 0 {
		return -1, io.EOF
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, fmt.Errorf("no descriptor in the message (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return -1, fmt.Errorf("no descriptor in the message (%v)", err)
	}
	return fds[0], nil
}

// stageTwo is the child: harden, install the execve notifier on this
// thread, hand its descriptor to the supervisor, execute the workload.
func stageTwo(o Options, getenv func(string) string, fdStr string) error {
	fd, err := strconv.Atoi(fdStr)
	if err != nil || fd < 3 {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("launch: %s=%q is not a descriptor", envStage, fdStr)}
	}
	sock := os.NewFile(uintptr(fd), "launch-sock")
	planned, err := plan(&o, getenv)
	if err != nil {
		return err
	}
	runtime.LockOSThread() // the notifier is this thread's filter; execve runs here
	listener := -1
	o.finish = func(rep *harden.Report) error {
		var err error
		listener, err = installExecNotifier()
		if err != nil {
			rep.Layers = append(rep.Layers, harden.LayerStatus{Name: harden.LayerNoSpawn, Required: true,
				Detail: "the one-program rule could not be installed: " + err.Error()})
			return &harden.UnavailableError{Layer: harden.LayerNoSpawn, KernelABI: rep.KernelLandlockABI,
				Reason: "seccomp user notification for execve", Err: err}
		}
		// The seccomp layer of that name is off for the workload (the
		// launcher's own execve must pass); the supervisor enforces it.
		rep.Layers = slices.DeleteFunc(rep.Layers, func(l harden.LayerStatus) bool { return l.Name == harden.LayerNoSpawn })
		rep.Layers = append(rep.Layers, harden.LayerStatus{Name: harden.LayerNoSpawn, Required: true, Enforced: true,
			Detail: "launcher supervisor: the workload's own execve only; every later execve and execveat refused (seccomp user notification), the execute right only on the program and its interpreters (Landlock)"})
		rep.DeniedSyscalls = append(rep.DeniedSyscalls, "execve/execveat after the workload's own (supervisor)")
		// Hand the notifier over and wait until the supervisor has
		// hardened itself: the report, once written, describes both.
		if err := unix.Sendmsg(int(sock.Fd()), []byte{0}, unix.UnixRights(listener), nil, 0); err != nil {
			return fmt.Errorf("handing the notifier to the supervisor: %w", err)
		}
		unix.Close(listener)
		ack := make([]byte, 1)
		if n, err := sock.Read(ack); n != 1 || ack[0] != 1 {
			return fmt.Errorf("the supervisor did not confirm its own hardening (%v)", err)
		}
		return nil
	}
	if err := applyAndReport(o, planned.Policy); err != nil {
		return err
	}
	sock.Close()
	return execWorkload(o.ctx(), planned, o.Environ)
}

// installExecNotifier installs, on the calling thread only, a filter that
// turns execve and execveat into notifications for the supervisor, and
// returns the listener descriptor. Other threads die at the execve.
func installExecNotifier() (int, error) {
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 0, Size: 4}, // nr
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_EXECVE, SkipTrue: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_EXECVEAT, SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
		bpf.RetConstant{Val: unix.SECCOMP_RET_USER_NOTIF},
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return -1, err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, in := range raw {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}
