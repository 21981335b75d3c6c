//go:build linux

package harden

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Child-mode environment: the test binary re-executes itself with these set,
// applies the policy in the child and attempts the checks there, so the test
// process itself is never restricted.
const (
	envChild  = "HARDEN_TEST_CHILD"  // system variant, see childSystems
	envChecks = "HARDEN_TEST_CHECKS" // JSON []Check
	// envThreads: run the checks on this many OS threads locked before Apply.
	envThreads = "HARDEN_TEST_THREADS"
)

// childSystems are the kernel interfaces a child can run with.
var childSystems = map[string]func() (system, bool){
	"host": func() (system, bool) { return host, true },
	// none applies nothing: the control showing every attempt works unhardened.
	"none": func() (system, bool) { return host, false },
	"abi0": func() (system, bool) { return withABI(0), true },
	"abi3": func() (system, bool) { return withABI(3), true },
	"no-seccomp": func() (system, bool) {
		s := host
		s.seccomp = func([]bpf.Instruction) error { return unix.ENOSYS }
		return s, true
	},
	// landlock-only skips the seccomp filter, to show the MPTCP gap it closes.
	"landlock-only": func() (system, bool) {
		s := host
		s.seccomp = func([]bpf.Instruction) error { return nil }
		return s, true
	},
}

func withABI(v int) system {
	s := host
	s.landlockABI = func() (int, error) { return v, nil }
	return s
}

// childOutput is what a child prints on stdout.
type childOutput struct {
	Report      Report    `json:"report"`
	ApplyError  string    `json:"apply_error,omitempty"`
	Unavailable *struct { // set when Apply returned *UnavailableError
		Layer     string `json:"layer"`
		KernelABI int    `json:"kernel_abi"`
	} `json:"unavailable,omitempty"`
	Results   []CheckResult `json:"results"`
	ThreadIDs []int         `json:"thread_ids,omitempty"`
}

func TestMain(m *testing.M) {
	if os.Getenv(EnvExecProbe) != "" {
		os.Exit(0) // started by ActExec: prove the exec worked, run nothing
	}
	if dir := os.Getenv("HARDEN_TEST_WORKLOAD"); dir != "" { // for `strace -f -c`
		if err := roleWorkload(dir, "127.0.0.1:0", "127.0.0.1:0"); err != nil {
			fmt.Fprintln(os.Stderr, "workload:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if raw := os.Getenv(envAllowList); raw != "" {
		os.Exit(allowListChild(raw))
	}
	if mode := os.Getenv(envChild); mode != "" {
		os.Exit(childMain(mode))
	}
	if mode := os.Getenv(envRlimitsChild); mode != "" {
		os.Exit(rlimitsChild(mode))
	}
	os.Exit(m.Run())
}

func childMain(mode string) int {
	var out childOutput
	// Threads locked before Apply run the checks after it: a layer set on
	// the applying thread only would let them through.
	var workers *lockedThreads
	if n, _ := strconv.Atoi(os.Getenv(envThreads)); n > 0 {
		workers = startLockedThreads(n)
	}
	sys, apply := childSystems[mode]()
	if apply {
		p, _, err := PolicyFromEnv(os.Getenv)
		if err != nil {
			out.ApplyError = err.Error()
			return emit(out)
		}
		out.Report, err = sys.apply(*p)
		if err != nil {
			out.ApplyError = err.Error()
			var ue *UnavailableError
			if errors.As(err, &ue) {
				out.Unavailable = &struct {
					Layer     string `json:"layer"`
					KernelABI int    `json:"kernel_abi"`
				}{ue.Layer, ue.KernelABI}
			}
			return emit(out) // fail closed: no check runs unprotected
		}
	}
	var checks []Check
	if err := json.Unmarshal([]byte(os.Getenv(envChecks)), &checks); err != nil {
		out.ApplyError = "decoding checks: " + err.Error()
		return emit(out)
	}
	if workers != nil {
		out.Results, out.ThreadIDs = workers.run(checks)
		return emit(out)
	}
	out.Results = RunChecks(checks)
	return emit(out)
}

// lockedThreads are goroutines each locked to its own OS thread.
type lockedThreads struct {
	jobs    []chan []Check
	results chan threadResult
}

type threadResult struct {
	tid     int
	results []CheckResult
}

func startLockedThreads(n int) *lockedThreads {
	w := &lockedThreads{results: make(chan threadResult, n)}
	ready := make(chan struct{}, n)
	for range n {
		job := make(chan []Check)
		w.jobs = append(w.jobs, job)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
			ready <- struct{}{}
			checks := <-job
			w.results <- threadResult{tid: unix.Gettid(), results: RunChecks(checks)}
		}()
	}
	for range n {
		<-ready
	}
	return w
}

// run gives every thread the checks and gathers the results and thread ids.
func (w *lockedThreads) run(checks []Check) ([]CheckResult, []int) {
	for _, job := range w.jobs {
		job <- checks
	}
	var all []CheckResult
	var tids []int
	for range w.jobs {
		r := <-w.results
		all = append(all, r.results...)
		tids = append(tids, r.tid)
	}
	return all, tids
}

func emit(out childOutput) int {
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		return 3
	}
	return 0
}

// runChild re-executes the test binary in child mode.
func runChild(t testing.TB, mode string, p Policy, extraEnv []string, checks ...Check) childOutput {
	t.Helper()
	pol, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := json.Marshal(checks)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+mode, EnvPolicy+"="+string(pol), envChecks+"="+string(ch))
	cmd.Env = append(cmd.Env, extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child %s: %v\nstderr:\n%s", mode, err, stderr.String())
	}
	var out childOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("child %s output %q: %v", mode, stdout.String(), err)
	}
	return out
}

// fixture is a policy over fresh directories and loopback ports.
type fixture struct {
	policy    Policy
	roDir     string // readable, with file ro.txt
	rwDir     string // writable, stands in for /tmp and the output dir
	deniedDir string // not in the policy, with file secret.txt
	connectOK string // 127.0.0.1:port listening and allowed
	connectNo string // 127.0.0.1:port listening and not allowed
	bindOK    string // 127.0.0.1:port free and allowed
	bindNo    string // 127.0.0.1:port free and not allowed
}

func newFixture(t testing.TB) fixture {
	t.Helper()
	f := fixture{roDir: t.TempDir(), rwDir: t.TempDir(), deniedDir: t.TempDir()}
	writeFile(t, filepath.Join(f.roDir, "ro.txt"))
	writeFile(t, filepath.Join(f.deniedDir, "secret.txt"))
	okPort, noPort := listenLoopback(t), listenLoopback(t)
	bindOK, bindNo := freePort(t), freePort(t)
	f.connectOK, f.connectNo = hostPort(okPort), hostPort(noPort)
	f.bindOK, f.bindNo = hostPort(bindOK), hostPort(bindNo)
	exe, ro := execFiles(t)
	f.policy = Policy{
		Schema: Schema,
		Role:   "test",
		Landlock: Landlock{
			MinABI:        1,
			ReadOnlyDirs:  append([]string{f.roDir}, ro...),
			ReadWriteDirs: []string{f.rwDir},
			ExecFiles:     exe,
			ConnectTCP:    []uint16{okPort},
			BindTCP:       []uint16{bindOK},
		},
		NoSpawn:         true,
		DenyUnixSockets: true,
	}
	return f
}

func writeFile(t testing.TB, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func hostPort(p uint16) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(p))) }

// listenLoopback starts a loopback listener that accepts and closes.
func listenLoopback(t testing.TB) uint16 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

func freePort(t testing.TB) uint16 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

// execFiles returns what must be executable to run the test binary again:
// itself and, when it is dynamically linked (cgo), its ELF interpreter,
// plus the library directories it reads.
func execFiles(t testing.TB) (exec, ro []string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exec = []string{self}
	f, err := elf.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		data := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(data, 0); err != nil {
			t.Fatal(err)
		}
		interp, err := filepath.EvalSymlinks(strings.TrimRight(string(data), "\x00"))
		if err != nil {
			t.Fatal(err)
		}
		exec = append(exec, interp)
		ro = []string{"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/etc"}
	}
	return exec, ro
}

func mptcpEnabled() bool {
	b, err := os.ReadFile("/proc/sys/net/mptcp/enabled")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}
