package launcher

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
)

// basePolicy is the agent's policy as the spec compiler writes it (the
// default spec), with writable as its read-write directories.
func basePolicy(writable ...string) harden.Policy {
	return harden.Policy{Schema: harden.Schema, Role: "agent",
		Landlock: harden.Landlock{MinABI: 4,
			ReadOnlyDirs: []string{"/etc", "/proc"}, ReadOnlyFiles: []string{"/dev/random", "/dev/urandom"},
			ReadWriteDirs: writable, ReadWriteFiles: []string{"/dev/null"},
			ExecFiles: []string{"/mcpsidecar"}, ConnectTCP: []uint16{3128, 3129, 8000}, BindTCP: []uint16{}},
		NoSpawn: true, DenyUnixSockets: true, NoListen: true, NoUDP: true, NoNetlink: true,
		BestEffort: []string{harden.LayerLandlockNet}, GoMaxProcs: 1}
}

// fakeImage builds an image tree: /usr/bin/prog is a copy of a dynamic
// ELF executable of the host (its PT_INTERP names the host's loader),
// /usr/bin/static a copy of this (static) test binary, scripts, and the
// directories a container has.
func fakeImage(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "usr/lib", "etc", "proc", "dev", "sys", "tmp", "sandbox-work", "sandbox-output", "opt/app", ".mcpsidecar",
		"var/lib/dpkg/info", "var/lib/misc", "var/log"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, "/bin/true", filepath.Join(root, "usr/bin/prog"), 0o755)
	self, _ := os.Executable()
	copyFile(t, self, filepath.Join(root, "usr/bin/static"), 0o755)
	copyFile(t, "/bin/true", filepath.Join(root, "usr/bin/noexec"), 0o644)
	write(t, filepath.Join(root, "opt/app/script.py"), "#!/usr/bin/prog -u\nprint(1)\n", 0o755)
	write(t, filepath.Join(root, "opt/app/envscript"), "#!/usr/bin/env prog\nprint(1)\n", 0o755)
	write(t, filepath.Join(root, "opt/app/data.txt"), "not a program\n", 0o755)
	write(t, filepath.Join(root, ".mcpsidecar/mcpsidecar"), "launcher", 0o755)
	if err := os.Symlink("usr/bin", filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	return root
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	write(t, to, string(data), mode)
}

func write(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

var writable = []string{"/tmp", "/sandbox-work", "/sandbox-output"}

func TestPlanOwnCommandOnly(t *testing.T) {
	root := fakeImage(t)
	got, err := Plan(Input{Base: basePolicy(writable...), Argv: []string{"prog", "-x"}, Root: root, PathEnv: "/usr/local/bin:/usr/bin", Self: "/.mcpsidecar/mcpsidecar"})
	if err != nil {
		t.Fatal(err)
	}
	want := basePolicy(writable...)
	want.Role = Role
	want.NoSpawn = false // replaced by the Landlock execute right and the one-execve supervisor
	// /var is split so the package database (/var/lib/dpkg) is in no rule.
	want.Landlock.ReadOnlyDirs = []string{"/proc", "/etc", "/opt", "/usr", "/var/lib/misc", "/var/log"}
	want.Landlock.ExecFiles = []string{"/usr/bin/prog", "/lib64/ld-linux-x86-64.so.2"}
	if diff := cmp.Diff(want, got.Policy); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}
	if got.Program != "/usr/bin/prog" || !cmp.Equal(got.Argv, []string{"prog", "-x"}) {
		t.Errorf("program %q argv %q", got.Program, got.Argv)
	}
}

func TestPlanShellAccess(t *testing.T) {
	root := fakeImage(t)
	got, err := Plan(Input{Base: basePolicy(writable...), Argv: []string{"/usr/bin/prog"}, ShellAccess: true, Root: root, Self: "/.mcpsidecar/mcpsidecar"})
	if err != nil {
		t.Fatal(err)
	}
	l := got.Policy.Landlock
	// The image's tree may run; the writable directories, the kernel
	// interfaces and the launcher are not in it.
	if !cmp.Equal(l.ExecDirs, []string{"/etc", "/opt", "/usr", "/var/lib/misc", "/var/log"}) || l.ExecFiles != nil {
		t.Errorf("exec dirs %q, exec files %q", l.ExecDirs, l.ExecFiles)
	}
	if !cmp.Equal(l.ReadOnlyDirs, []string{"/proc"}) || !cmp.Equal(l.ReadWriteDirs, writable) {
		t.Errorf("read-only %q, read-write %q", l.ReadOnlyDirs, l.ReadWriteDirs)
	}
	for _, d := range append(l.ExecDirs, l.ReadOnlyDirs...) {
		for _, w := range writable {
			if within(w, d) {
				t.Errorf("writable %s lies in granted directory %s", w, d)
			}
		}
	}
}

// TestPlanShellAccessLauncherCommand: under test-sandbox --image the
// command is the launcher's own file, outside every image directory; with
// shell_access it still gets the execute right (it did not: the probe
// could not start, "permission denied").
func TestPlanShellAccessLauncherCommand(t *testing.T) {
	root := fakeImage(t)
	self, _ := os.Executable()
	copyFile(t, self, filepath.Join(root, ".mcpsidecar/mcpsidecar"), 0o755) // static, as the real one
	got, err := Plan(Input{Base: basePolicy(writable...), Argv: []string{"/.mcpsidecar/mcpsidecar", "probe"}, ShellAccess: true, Root: root, Self: "/.mcpsidecar/mcpsidecar"})
	if err != nil {
		t.Fatal(err)
	}
	if l := got.Policy.Landlock; !cmp.Equal(l.ExecFiles, []string{"/.mcpsidecar/mcpsidecar"}) || slices.Contains(l.ExecDirs, "/.mcpsidecar") {
		t.Errorf("exec files %q, exec dirs %q: want the launcher file only", l.ExecFiles, l.ExecDirs)
	}
}

func TestPlanInterpreters(t *testing.T) {
	root := fakeImage(t)
	if ld, _ := elfInterp(filepath.Join(root, "usr/bin/static")); ld != "" {
		t.Skipf("the test binary is dynamic (cgo, %s): build with CGO_ENABLED=0 as the Makefile does", ld)
	}
	tests := []struct {
		name  string
		argv  []string
		exec  []string
		shell bool
	}{
		{"static binary needs no loader", []string{"/usr/bin/static"}, []string{"/usr/bin/static"}, false},
		{"script: its interpreter and that one's loader", []string{"/opt/app/script.py"}, []string{"/opt/app/script.py", "/usr/bin/prog", "/lib64/ld-linux-x86-64.so.2"}, false},
		{"the launcher as the command (test-sandbox --image)", []string{"/usr/bin/static", "probe"}, []string{"/usr/bin/static"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Plan(Input{Base: basePolicy(writable...), Argv: tt.argv, Root: root, ShellAccess: tt.shell})
			if err != nil {
				t.Fatal(err)
			}
			if !cmp.Equal(got.Policy.Landlock.ExecFiles, tt.exec) {
				t.Errorf("exec files %q, want %q", got.Policy.Landlock.ExecFiles, tt.exec)
			}
		})
	}
}

// TestPlanRefuses: each command the policy cannot name as one file fails
// with a message that says why.
func TestPlanRefuses(t *testing.T) {
	root := fakeImage(t)
	tests := []struct {
		argv []string
		want string
	}{
		{nil, "no command to run"},
		{[]string{"nope"}, `program "nope" not found in PATH /usr/bin of the image`},
		{[]string{"./prog"}, `program "./prog" is a relative path`},
		{[]string{"/usr/bin/noexec"}, "program /usr/bin/noexec: not executable (no x bit)"},
		{[]string{"/usr/bin"}, "program /usr/bin: not a regular file"},
		{[]string{"/opt/app/missing"}, "program /opt/app/missing: no such file in the image"},
		{[]string{"/opt/app/envscript"}, "is a script run through /usr/bin/env, which starts another program by name: without shell_access give the interpreter as the command"},
		{[]string{"/opt/app/data.txt"}, "program /opt/app/data.txt: not an ELF executable or a #! script"},
	}
	for _, tt := range tests {
		_, err := Plan(Input{Base: basePolicy(writable...), Argv: tt.argv, Root: root, PathEnv: "/usr/bin"})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Plan(%q) = %v, want an error containing %q", tt.argv, err, tt.want)
		}
	}
	bad := basePolicy(writable...)
	bad.Schema = "x"
	if _, err := Plan(Input{Base: bad, Argv: []string{"/usr/bin/prog"}, Root: root}); err == nil {
		t.Error("an invalid base policy was accepted")
	}
}

// TestPlanEnvScriptWithShell: with shell_access a script through env is
// fine (env may start what it names from the image's tree).
func TestPlanEnvScriptWithShell(t *testing.T) {
	root := fakeImage(t)
	write(t, filepath.Join(root, "usr/bin/env"), "", 0o755)
	copyFile(t, "/bin/true", filepath.Join(root, "usr/bin/env"), 0o755)
	if _, err := Plan(Input{Base: basePolicy(writable...), Argv: []string{"/opt/app/envscript"}, Root: root, ShellAccess: true}); err != nil {
		t.Fatal(err)
	}
}
