//go:build linux

package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/hold"
	"github.com/mcpsidecar/mcpsidecar/internal/noexec"
)

// envTestLaunch makes the test binary the launcher: its arguments after
// "--" are the command (the supervisor re-executes it the same way).
const envTestLaunch = "LAUNCHER_TEST_LAUNCH"

// envTestAssumeNoexec makes the test launcher take every writable
// directory as noexec (see workDir).
const envTestAssumeNoexec = "LAUNCHER_TEST_ASSUME_NOEXEC"

// workDir is the workload's writable directory in a process test: as root
// a real noexec mount (package noexec), as the launcher needs; without
// root, where no mount can be made, a plain directory the test launcher
// is told to take as noexec (noexecEnv), and the attempts that need the
// real mount are left out (realNoexec).
func workDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		t.Logf("not root: %s is not a noexec mount; the launcher's statfs check is told to pass it", dir)
		return dir
	}
	h, err := noexec.Mount(dir)
	if err != nil {
		t.Fatalf("making %s noexec: %v", dir, err)
	}
	t.Cleanup(func() { h.Release() })
	return dir
}

// realNoexec reports whether dir really is on a noexec mount.
func realNoexec(dir string) bool { return noexec.Check(dir) == nil }

// noexecEnv is the test launcher's environment for work: told to assume
// noexec only when it is not.
func noexecEnv(work string) []string {
	if realNoexec(work) {
		return nil
	}
	return []string{envTestAssumeNoexec + "=1"}
}

// allNoexec is a mount table of one noexec,nosuid,nodev root: every path
// passes the mount walk (for tests that stand in for statfs too).
func allNoexec() (string, error) {
	return "1 0 0:1 / / rw,noexec,nosuid,nodev - tmpfs none rw\n", nil
}

func TestMain(m *testing.M) {
	if os.Getenv(envTestLaunch) == "1" {
		i := slices.Index(os.Args, "--")
		o := Options{Argv: os.Args[i+1:], Environ: os.Environ(), Stderr: os.Stderr, ReportDir: os.Getenv("LAUNCHER_TEST_REPORT")}
		if os.Getenv(envTestAssumeNoexec) == "1" {
			o.checkNoexec = func(string) error { return nil } // see workDir
			o.mountinfo = allNoexec
		}
		err := Launch(o)
		var ee *ExitError
		if errors.As(err, &ee) {
			if ee.Err != nil {
				fmt.Fprintln(os.Stderr, ee.Err)
			}
			os.Exit(ee.Code)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// python is the host's interpreter the process tests run: a real dynamic
// ELF program with shared libraries, like a user's workload.
func python(t *testing.T) string {
	t.Helper()
	// Debian's own, not a shim script on PATH (pyenv's is a bash script).
	p := "/usr/bin/python3"
	if _, err := os.Stat(p); err != nil {
		t.Fatal("/usr/bin/python3 is not installed (apt-get install python3; .ci/run installs it): the launcher process tests need a real interpreter")
	}
	return p
}

// requireLandlock fails the test when the kernel lacks Landlock's network rules and
// scopes.
func requireLandlock(t *testing.T) {
	t.Helper()
	if abi, err := ll.LandlockGetABIVersion(); err != nil || abi < 6 {
		t.Fatalf("this kernel's Landlock ABI is below 6 (%d, %v): the launcher cannot be proven here", abi, err)
	}
}

// launched is one launcher run in a child process.
type launched struct {
	code   int
	stdout string
	stderr string
}

// launch runs argv under the launcher with the agent's policy (work is
// the writable directory, port the one allowed TCP port), shell access as
// given.
func launch(t *testing.T, shell bool, work string, port int, argv ...string) launched {
	t.Helper()
	return launchEnv(t, nil, shell, work, port, argv...)
}

// launchEnv is launch with env added to the launcher's environment.
func launchEnv(t *testing.T, env []string, shell bool, work string, port int, argv ...string) launched {
	t.Helper()
	requireLandlock(t)
	p := basePolicy(work)
	p.Landlock.ConnectTCP = []uint16{uint16(port)}
	p.BestEffort = nil // this kernel has every layer; a missing one fails the test
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, append([]string{"launch", "--"}, argv...)...)
	cmd.Env = append(os.Environ(), envTestLaunch+"=1", harden.EnvPolicy+"="+string(raw), "LAUNCHER_TEST_REPORT="+work, "WORK="+work)
	cmd.Env = append(cmd.Env, noexecEnv(work)...)
	cmd.Env = append(cmd.Env, env...)
	if shell {
		cmd.Env = append(cmd.Env, EnvShellAccess+"=1")
	} else {
		cmd.Env = append(cmd.Env, EnvShellAccess+"=0")
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return launched{code, out.String(), errb.String()}
}

// listen serves one TCP port on loopback that answers "hi".
func listen(t *testing.T) int {
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
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// attempts is a Python program that tries each action and prints one
// JSON line per action: {"name": ..., "ok": bool, "error": ...}.
const attempts = `
import json, os, socket, subprocess, sys, shutil, stat
work = os.environ["WORK"]
results = []
def attempt(name, fn):
    try:
        fn()
        results.append({"name": name, "ok": True})
    except Exception as e:
        results.append({"name": name, "ok": False, "error": type(e).__name__ + ": " + str(e)})
def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    assert s.recv(2) == b"hi"
    s.close()
def write_exec():
    dst = os.path.join(work, "dropped")
    shutil.copy("/bin/true", dst)
    os.chmod(dst, 0o755)
    subprocess.run([dst], check=True)
def execv_in_child(path, *args):
    pid = os.fork()
    if pid == 0:
        try:
            os.execv(path, [path, *args])
        except OSError as e:
            os._exit(100 + e.errno)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code >= 100:
        raise PermissionError(code - 100, os.strerror(code - 100))
    if code != 0:
        raise RuntimeError("exit %d" % code)
def load_written():
    import ctypes
    lib = [l.split()[-1] for l in open("/proc/self/maps") if "libc.so" in l or "libc-" in l][0]
    dst = os.path.join(work, "written.so")
    shutil.copy(lib, dst)
    ctypes.CDLL(dst)
def write_file(path):
    with open(path, "w") as f:
        f.write("x")
for a in sys.argv[1:]:
    kind, _, arg = a.partition(":")
    if kind == "connect": attempt(a, lambda: connect(int(arg)))
    elif kind == "write": attempt(a, lambda: write_file(arg))
    elif kind == "read": attempt(a, lambda: open(arg).read(1))
    elif kind == "spawn": attempt(a, lambda: subprocess.run(arg.split(), check=True, stdout=subprocess.DEVNULL))
    elif kind == "execv": attempt(a, lambda: execv_in_child(*arg.split()))
    elif kind == "write-exec": attempt(a, write_exec)
    elif kind == "ctypes": attempt(a, lambda: __import__("ctypes").CDLL("libc.so.6").getpid())
    elif kind == "load-written": attempt(a, load_written)
for r in results:
    print(json.dumps(r))
`

type attemptResult struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

func parseAttempts(t *testing.T, l launched) map[string]attemptResult {
	t.Helper()
	if l.code != 0 {
		t.Fatalf("launcher exit %d\nstdout:\n%s\nstderr:\n%s", l.code, l.stdout, l.stderr)
	}
	out := map[string]attemptResult{}
	for _, line := range strings.Split(strings.TrimSpace(l.stdout), "\n") {
		var r attemptResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v\nstderr:\n%s", line, err, l.stderr)
		}
		out[r.Name] = r
	}
	return out
}

func expect(t *testing.T, got map[string]attemptResult, allowed, refused []string) {
	t.Helper()
	for _, a := range allowed {
		if r, ok := got[a]; !ok || !r.OK {
			t.Errorf("%s: want allowed, got %+v", a, r)
		}
	}
	for _, a := range refused {
		r, ok := got[a]
		if !ok || r.OK {
			t.Errorf("%s: want refused, got %+v", a, r)
			continue
		}
		// dlopen words the kernel's EPERM for an executable mapping as
		// "failed to map segment from shared object".
		if !strings.Contains(r.Error, "Permission") && !strings.Contains(r.Error, "Errno 1") && !strings.Contains(r.Error, "Errno 13") &&
			!strings.Contains(r.Error, "failed to map segment") {
			t.Errorf("%s: refused, but not by a permission error: %s", a, r.Error)
		}
	}
}

// TestLaunchOwnCommandOnly runs python3 (dynamic, with shared libraries)
// without shell_access: it starts, which proves the ELF interpreter's
// execute right and READ-only libraries suffice (Landlock does not check
// PROT_EXEC mappings), uses its allowed port and writable directory, and
// every attempt to start another program — /bin/sh through os.execv, a
// subprocess, a file it wrote, the dynamic loader running /bin/sh, even
// python3 itself again — is refused.
func TestLaunchOwnCommandOnly(t *testing.T) {
	py := python(t)
	work := workDir(t)
	allowedPort, otherPort := listen(t), listen(t)
	ld, err := elfInterp(py)
	if err != nil || ld == "" {
		t.Fatalf("python3 has no ELF interpreter: %v", err)
	}
	l := launch(t, false, work, allowedPort, py, "-c", attempts,
		"connect:"+strconv.Itoa(allowedPort), "connect:"+strconv.Itoa(otherPort),
		"write:"+filepath.Join(work, "answer.txt"), "write:/etc/mcpsidecar-launcher-test", "write:"+filepath.Dir(py)+"/x",
		"read:/etc/hostname", "read:/var/lib/dpkg/status", "ctypes:",
		"execv:/bin/sh -c true", "execv:"+py+" -c pass", "execv:"+ld+" /bin/sh -c true",
		"spawn:/bin/true", "write-exec:", "load-written:")
	got := parseAttempts(t, l)
	for _, r := range got {
		t.Logf("%s: ok=%v %s", r.Name, r.OK, r.Error)
	}
	refused := []string{"connect:" + strconv.Itoa(otherPort), "write:/etc/mcpsidecar-launcher-test", "read:/var/lib/dpkg/status", "write:" + filepath.Dir(py) + "/x",
		"execv:/bin/sh -c true", "execv:" + py + " -c pass", "execv:" + ld + " /bin/sh -c true", "spawn:/bin/true", "write-exec:"}
	if realNoexec(work) {
		refused = append(refused, "load-written:") // the mmap PROT_EXEC of a written library: only a noexec mount refuses it
	}
	expect(t, got,
		[]string{"connect:" + strconv.Itoa(allowedPort), "write:" + filepath.Join(work, "answer.txt"), "read:/etc/hostname", "ctypes:"},
		refused)
	if !strings.Contains(l.stderr, "refused a program start") {
		t.Errorf("the supervisor did not log its refusals:\n%s", l.stderr)
	}
	rep, err := os.ReadFile(filepath.Join(work, harden.ReportFile))
	if err != nil {
		t.Fatalf("no harden report: %v", err)
	}
	r, err := harden.ParseReport(rep)
	if err != nil || r.Role != Role || len(r.Degradations) != 0 {
		t.Errorf("report %+v, %v", r, err)
	}
	// Every layer the agent's policy requires is enforced for the
	// workload too; no-spawn by the supervisor.
	enforced := map[string]bool{}
	for _, l := range r.Layers {
		enforced[l.Name] = l.Enforced
	}
	for _, l := range basePolicy(work).RequiredLayers() {
		if !enforced[l] {
			t.Errorf("layer %s is not enforced in the workload's report: %+v", l, r.Layers)
		}
	}
}

// TestLaunchRlimits: the limits of harden.EnvRlimits (a pod's, which
// takes no ulimits) are in force in the workload, through the supervisor
// and the second stage and the workload's execve, with and without
// shell_access, and the report records them.
func TestLaunchRlimits(t *testing.T) {
	py := python(t)
	const show = "import json, resource; print(json.dumps([resource.getrlimit(resource.RLIMIT_FSIZE), resource.getrlimit(resource.RLIMIT_NOFILE)]))"
	for _, shell := range []bool{false, true} {
		t.Run(fmt.Sprintf("shell_access=%v", shell), func(t *testing.T) {
			work := workDir(t)
			l := launchEnv(t, []string{harden.EnvRlimits + "=fsize=65536:65536,nofile=256:256"}, shell, work, listen(t), py, "-c", show)
			if l.code != 0 {
				t.Fatalf("launcher exit %d\nstdout:\n%s\nstderr:\n%s", l.code, l.stdout, l.stderr)
			}
			var got [][2]uint64
			if err := json.Unmarshal([]byte(l.stdout), &got); err != nil {
				t.Fatalf("decoding %q: %v", l.stdout, err)
			}
			if want := [][2]uint64{{65536, 65536}, {256, 256}}; !slices.Equal(got, want) {
				t.Errorf("the workload's fsize and nofile limits %v, want %v", got, want)
			}
			b, err := os.ReadFile(filepath.Join(work, harden.ReportFile))
			if err != nil {
				t.Fatalf("no harden report: %v", err)
			}
			r, err := harden.ParseReport(b)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(r.Layers, func(l harden.LayerStatus) bool { return l.Name == harden.LayerRlimits && l.Enforced }) {
				t.Errorf("no enforced %s layer in the workload's report: %+v", harden.LayerRlimits, r.Layers)
			}
		})
	}
}

// TestLaunchShellAccess: with shell_access programs of the image's tree
// run, a file the workload wrote never does, and the network and the
// filesystem rules stand.
func TestLaunchShellAccess(t *testing.T) {
	py := python(t)
	work := workDir(t)
	allowedPort, otherPort := listen(t), listen(t)
	l := launch(t, true, work, allowedPort, py, "-c", attempts,
		"spawn:/bin/true", "execv:/bin/sh -c true", "write-exec:",
		"connect:"+strconv.Itoa(allowedPort), "connect:"+strconv.Itoa(otherPort), "write:/etc/mcpsidecar-launcher-test")
	expect(t, parseAttempts(t, l),
		[]string{"spawn:/bin/true", "execv:/bin/sh -c true", "connect:" + strconv.Itoa(allowedPort)},
		[]string{"write-exec:", "connect:" + strconv.Itoa(otherPort), "write:/etc/mcpsidecar-launcher-test"})
}

// TestLoaderNeedsExecute verifies the kernel behaviour the plan relies on:
// without the execute right on the ELF interpreter a dynamic program does
// not start (binfmt_elf opens the interpreter for execution, which
// Landlock checks), so the plan must grant it.
func TestLoaderNeedsExecute(t *testing.T) {
	py := python(t)
	requireLandlock(t)
	work := t.TempDir()
	p := basePolicy(work)
	planned, err := Plan(Input{Base: p, Argv: []string{py, "-c", "print('started')"}, Root: "/"})
	if err != nil {
		t.Fatal(err)
	}
	pol := planned.Policy
	pol.Landlock.ExecFiles = []string{planned.Program} // the loader left out
	raw, _ := json.Marshal(pol)
	self, _ := os.Executable()
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), envChildExec+"="+string(raw), envChildArgv+"="+py)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "permission denied") {
		t.Fatalf("python3 started without the loader's execute right (err %v): %s", err, out)
	}
}

const (
	envChildExec = "LAUNCHER_TEST_APPLY_EXEC" // policy JSON: apply it and exec $LAUNCHER_TEST_ARGV
	envChildArgv = "LAUNCHER_TEST_ARGV"
)

func init() {
	if os.Getenv("LAUNCHER_TEST_NOOP") == "1" {
		os.Exit(0) // the benchmark's baseline: start this binary, do nothing
	}
	raw := os.Getenv(envChildExec)
	if raw == "" {
		return
	}
	p, err := harden.ParsePolicy([]byte(raw))
	if err != nil {
		fmt.Println(err)
		os.Exit(3)
	}
	if _, err := harden.Apply(*p); err != nil {
		fmt.Println(err)
		os.Exit(3)
	}
	argv := strings.Fields(os.Getenv(envChildArgv))
	err = execWorkload(context.Background(), Planned{Program: argv[0], Argv: argv}, []string{"PATH=/usr/bin"})
	fmt.Println(err)
	os.Exit(4)
}

// BenchmarkLaunch is the launcher's start-up cost: /bin/true run directly,
// under the launcher with shell_access (plan, harden, execve), and under
// the supervisor (plus a second stage and the notifier); the baseline
// "launcher-binary-noop" starts the same binary and exits at once.
func BenchmarkLaunch(b *testing.B) {
	if abi, err := ll.LandlockGetABIVersion(); err != nil || abi < 6 {
		b.Skip("no Landlock")
	}
	work := workDir(b)
	p := basePolicy(work)
	raw, _ := json.Marshal(p)
	self, _ := os.Executable()
	env := append(os.Environ(), envTestLaunch+"=1", harden.EnvPolicy+"="+string(raw))
	env = append(env, noexecEnv(work)...)
	run := func(b *testing.B, name string, args []string, env []string) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command(name, args...)
				if name != "/bin/true" {
					cmd = exec.Command(self, args...)
				}
				cmd.Env = env
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
			}
		})
	}
	run(b, "/bin/true", nil, os.Environ())
	run(b, "launcher-binary-noop", nil, append(os.Environ(), "LAUNCHER_TEST_NOOP=1"))
	run(b, "shell_access", []string{"launch", "--", "/bin/true"}, append(env, EnvShellAccess+"=1"))
	run(b, "own-command-only", []string{"launch", "--", "/bin/true"}, append(env, EnvShellAccess+"=0"))
}

// TestLaunchFailsClosed: a layer the kernel cannot enforce stops the
// launch with exit 5 before the command runs, and no policy at all is a
// refusal, never an unhardened run.
func TestLaunchFailsClosed(t *testing.T) {
	work := t.TempDir()
	raw, _ := json.Marshal(basePolicy(work))
	env := []string{"PATH=/usr/bin:/bin", harden.EnvPolicy + "=" + string(raw), EnvShellAccess + "=1"}
	unavailable := func(p harden.Policy) (harden.Report, error) {
		return harden.Report{Role: p.Role}, &harden.UnavailableError{Layer: harden.LayerLandlockFS, Reason: "test kernel without Landlock"}
	}
	err := Launch(Options{Argv: []string{"/bin/true"}, Environ: env, Stderr: &bytes.Buffer{}, Apply: unavailable, checkNoexec: func(string) error { return nil }, mountinfo: allNoexec})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitUnavailable || !strings.Contains(err.Error(), "landlock-fs") {
		t.Fatalf("Launch = %v, want exit %d naming the layer", err, ExitUnavailable)
	}
	err = Launch(Options{Argv: []string{"/bin/true"}, Environ: []string{"PATH=/usr/bin", EnvShellAccess + "=0"}, Stderr: &bytes.Buffer{}, Apply: unavailable})
	if !errors.As(err, &ee) || ee.Code != ExitUsage || !strings.Contains(err.Error(), "refusing to run a workload unhardened") {
		t.Fatalf("Launch without a policy = %v, want a refusal", err)
	}
}

// TestLaunchShellAccessMustBeSet: the shell_access switch comes from the
// harness, explicitly; absent or odd (as an image's own ENV might try),
// the launch is refused.
func TestLaunchShellAccessMustBeSet(t *testing.T) {
	raw, _ := json.Marshal(basePolicy(t.TempDir()))
	for _, v := range []string{"", "yes", "true"} {
		env := []string{"PATH=/usr/bin:/bin", harden.EnvPolicy + "=" + string(raw)}
		if v != "" {
			env = append(env, EnvShellAccess+"="+v)
		}
		err := Launch(Options{Argv: []string{"/bin/true"}, Environ: env, Stderr: &bytes.Buffer{},
			Apply: func(harden.Policy) (harden.Report, error) { t.Fatal("applied"); return harden.Report{}, nil }})
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != ExitUsage || !strings.Contains(err.Error(), "want 0 or 1") {
			t.Errorf("%s=%q: Launch = %v, want a refusal", EnvShellAccess, v, err)
		}
	}
}

// TestLaunchRefusesExecWritable: a writable directory that is not on a
// noexec mount stops the launch with exit 5 naming it, before anything is
// applied or run; the path the harness says the user accepted passes, as
// a degradation in the report. The statfs itself is the kernel's: as root
// the test also runs it on a real noexec mount and a plain directory.
func TestLaunchRefusesExecWritable(t *testing.T) {
	work := t.TempDir()
	raw, _ := json.Marshal(basePolicy("/tmp", "/sandbox-work", work))
	env := []string{"PATH=/usr/bin:/bin", harden.EnvPolicy + "=" + string(raw), EnvShellAccess + "=1"}
	execOnly := func(dir string) error {
		if dir == work {
			return &noexec.NotNoexecError{Path: dir}
		}
		return nil
	}
	noApply := func(harden.Policy) (harden.Report, error) {
		t.Fatal("hardening applied despite an exec writable path")
		return harden.Report{}, nil
	}
	err := Launch(Options{Argv: []string{"/bin/true"}, Environ: env, Stderr: &bytes.Buffer{}, Apply: noApply, checkNoexec: execOnly, mountinfo: allNoexec})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitUnavailable || !strings.Contains(err.Error(), work) || !strings.Contains(err.Error(), "cannot enforce") {
		t.Fatalf("Launch = %v, want exit %d naming %s", err, ExitUnavailable, work)
	}

	// Accepted by the harness: the launch goes on (here up to a fake
	// Apply that stops it) and the report carries the degradation.
	stop := errors.New("stop here")
	var stderr bytes.Buffer
	accepted := append(slices.Clone(env), EnvExecAccepted+"="+work)
	err = Launch(Options{Argv: []string{"/bin/true"}, Environ: accepted, Stderr: &stderr, ReportDir: work, checkNoexec: execOnly, mountinfo: allNoexec,
		Apply: func(p harden.Policy) (harden.Report, error) {
			return harden.Report{Schema: harden.ReportSchema, Role: p.Role}, stop
		}})
	if !errors.Is(err, stop) {
		t.Fatalf("Launch with %s=%s = %v, want it to go on to Apply", EnvExecAccepted, work, err)
	}
	if !strings.Contains(stderr.String(), work+" is not noexec") {
		t.Errorf("the degradation is not printed:\n%s", stderr.String())
	}
	// Only that path: another exec path still stops the launch.
	err = Launch(Options{Argv: []string{"/bin/true"}, Environ: append(slices.Clone(env), EnvExecAccepted+"=/elsewhere"), Stderr: &bytes.Buffer{},
		Apply: noApply, checkNoexec: execOnly, mountinfo: allNoexec})
	if !errors.As(err, &ee) || ee.Code != ExitUnavailable {
		t.Fatalf("Launch accepting another path = %v, want exit %d", err, ExitUnavailable)
	}

	if os.Geteuid() != 0 {
		t.Log("not root: the statfs check on a real noexec mount is proven as root")
		return
	}
	mounted := workDir(t)
	if err := checkWritable(&Options{}, basePolicy(mounted), ""); err != nil {
		t.Errorf("a real noexec mount: %v", err)
	}
	plain := t.TempDir()
	if realNoexec(plain) {
		t.Fatalf("the test's temporary directory %s is itself noexec: set TMPDIR to an exec filesystem", plain)
	}
	if err := checkWritable(&Options{}, basePolicy(mounted, plain), ""); !errors.As(err, &ee) || ee.Code != ExitUnavailable || !strings.Contains(err.Error(), plain) {
		t.Errorf("a plain directory: %v, want exit %d naming it", err, ExitUnavailable)
	}
}

// TestLaunchHolds: with the harness's start hold set, the launcher
// hardens, writes its report, and only then waits: the workload runs only
// once the release file exists, and never sees the hold's variable (it
// would wait for a file that is gone). Both modes.
func TestLaunchHolds(t *testing.T) {
	py := python(t)
	for _, shell := range []bool{false, true} {
		t.Run(fmt.Sprintf("shell_access=%v", shell), func(t *testing.T) {
			work := workDir(t)
			release := filepath.Join(work, hold.File)
			ran := filepath.Join(work, "ran")
			errc := make(chan error, 1)
			go func() {
				deadline := time.Now().Add(30 * time.Second)
				for {
					if _, err := os.Stat(filepath.Join(work, harden.ReportFile)); err == nil {
						break
					}
					if time.Now().After(deadline) {
						errc <- errors.New("no report within 30s")
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
				time.Sleep(200 * time.Millisecond)
				if _, err := os.Stat(ran); err == nil {
					errc <- errors.New("the workload ran before its release")
					return
				}
				errc <- os.WriteFile(release, []byte("tok"), 0o600)
			}()
			l := launchEnv(t, []string{hold.Env + "=" + release, hold.TokenEnv + "=tok"}, shell, work, listen(t), py, "-c",
				`import os; open(os.environ["WORK"]+"/ran","w").write(os.environ.get("`+hold.Env+`", "unset")+os.environ.get("`+hold.TokenEnv+`", ""))`)
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if l.code != 0 {
				t.Fatalf("exit %d\nstderr:\n%s", l.code, l.stderr)
			}
			got, err := os.ReadFile(ran)
			if err != nil || string(got) != "unset" {
				t.Errorf("the workload saw the hold variable as %q (%v), want it unset", got, err)
			}
			if _, err := os.Lstat(release); err == nil {
				t.Error("the release file was not consumed")
			}
		})
	}
}
