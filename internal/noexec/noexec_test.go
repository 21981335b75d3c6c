//go:build linux

package noexec

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestParseMountinfo(t *testing.T) {
	in := "22 27 0:21 / /proc rw,relatime - proc proc rw\n" +
		"91 74 254:0 /r/run-1/agent /sandbox-output rw,nosuid,nodev,noexec,relatime shared:1 - ext4 /dev/vda rw\n" +
		`92 74 254:0 /a\040b /with\040space\134x rw,noexec - ext4 /dev/vda rw` + "\n"
	got, err := parseMountinfo(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []mountEntry{
		{point: "/proc", opts: []string{"rw", "relatime"}},
		{point: "/sandbox-output", opts: []string{"rw", "nosuid", "nodev", "noexec", "relatime"}},
		{point: `/with space\x`, opts: []string{"rw", "noexec"}},
	}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(mountEntry{})); d != "" {
		t.Errorf("mismatch (-want +got):\n%s", d)
	}
	if _, err := parseMountinfo("1 2 3\n"); err == nil {
		t.Error("a short line parsed")
	}
}

func TestOurs(t *testing.T) {
	noexec := []string{"rw", "noexec"}
	for _, c := range []struct {
		point string
		opts  []string
		want  bool
	}{
		{"/runs/run-20261202-1/agent", noexec, true},
		{"/runs/run-20261202-1/agent", []string{"rw"}, false}, // not made by Mount
		{"/runs/run-20261202-1", noexec, false},               // the run directory itself
		{"/runs/run-20261202-1/agent/x", noexec, false},       // below a role
		{"/runs/other/agent", noexec, false},                  // not a run directory
		{"/elsewhere/run-1/agent", noexec, false},
		{"/runs/../x/run-1/agent", noexec, false},
	} {
		if got := ours("/runs", mountEntry{point: c.point, opts: c.opts}); got != c.want {
			t.Errorf("ours(%s %v) = %v, want %v", c.point, c.opts, got, c.want)
		}
	}
}

// asRoot is true when the test may mount. The mount tests prove the real
// mount as root; without root they prove that Mount fails with the
// kernel's EPERM and leaves nothing mounted (what a non-root run meets).
func asRoot() bool { return os.Geteuid() == 0 }

func TestMountWithoutPrivilege(t *testing.T) {
	if asRoot() {
		t.Log("running as root: the privileged path is proven by TestMountNoexec")
		return
	}
	dir := t.TempDir()
	_, err := Mount(dir)
	var me *Error
	if !errors.As(err, &me) || !errors.Is(err, unix.EPERM) {
		t.Fatalf("Mount without CAP_SYS_ADMIN = %v, want an *Error wrapping EPERM", err)
	}
	if m, _ := isMountPoint(dir); m {
		t.Error("left a mount behind")
	}
}

// TestMountNoexec: the directory becomes a noexec, nosuid, nodev mount;
// a file written there cannot be mapped executable (mmap PROT_EXEC nor
// mprotect); Release unmounts it and the files stay.
func TestMountNoexec(t *testing.T) {
	if !asRoot() {
		t.Log("not root: TestMountWithoutPrivilege proves the refusal")
		return
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "x.so")
	if err := os.WriteFile(lib, make([]byte, 4096), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := mapExec(lib); err != nil {
		t.Fatalf("before the mount, mapping executable failed (%v): this test cannot tell the difference", err)
	}
	h, err := Mount(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Release() })
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]int64{"noexec": unix.ST_NOEXEC, "nosuid": unix.ST_NOSUID, "nodev": unix.ST_NODEV} {
		if st.Flags&f == 0 {
			t.Errorf("not %s: statfs flags %#x", name, st.Flags)
		}
	}
	if err := Check(dir); err != nil {
		t.Error(err)
	}
	self, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if err := SeenIn(self, dir); err != nil {
		t.Errorf("SeenIn(self) = %v", err)
	}
	if err := mapExec(lib); !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EACCES) {
		t.Errorf("mmap PROT_EXEC on the noexec mount = %v, want EPERM", err)
	}
	if err := mprotectExec(lib); !errors.Is(err, unix.EACCES) {
		t.Errorf("mprotect PROT_EXEC of a mapping from the noexec mount = %v, want EACCES", err)
	}
	if _, err := Mount(dir); err == nil {
		t.Error("a second Mount stacked on the first")
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if m, _ := isMountPoint(dir); m {
		t.Error("still mounted after Release")
	}
	if _, err := os.Stat(lib); err != nil {
		t.Errorf("the file did not stay: %v", err)
	}
	if err := Check(dir); err == nil {
		t.Error("Check passes on an exec directory")
	}
	if err := h.Release(); err != nil {
		t.Errorf("a second Release = %v", err)
	}
}

func TestMountRefusesBadPaths(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	link := filepath.Join(dir, "l")
	os.Symlink(dir, link)
	for _, p := range []string{"relative/dir", dir + "/../" + filepath.Base(dir), file, link, filepath.Join(dir, "missing")} {
		if h, err := Mount(p); err == nil {
			h.Release()
			t.Errorf("Mount(%q) succeeded", p)
		}
	}
}

// TestSweep: only the orphaned mounts of run directories are removed; a
// live run's (its lock held) stays.
func TestSweep(t *testing.T) {
	if !asRoot() {
		got, err := Sweep(t.TempDir())
		if err != nil || len(got) != 0 {
			t.Fatalf("Sweep of an empty runs directory = %v, %v", got, err)
		}
		return
	}
	runs := t.TempDir()
	dead, live := filepath.Join(runs, "run-1", "agent"), filepath.Join(runs, "run-2", "agent")
	for _, d := range []string{dead, live} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hd, err := Mount(dead)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dead, unix.MNT_DETACH) })
	unix.Close(hd.fd) // its process died: the lock is gone, the mount stays
	hl, err := Mount(live)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hl.Release() })
	got, err := Sweep(runs)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{dead}, got); d != "" {
		t.Errorf("swept (-want +got):\n%s", d)
	}
	if m, _ := isMountPoint(dead); m {
		t.Error("the orphaned mount is still there")
	}
	if m, _ := isMountPoint(live); !m {
		t.Error("the live run's mount was removed")
	}
}

func mapExec(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE)
	if err == nil {
		unix.Munmap(b)
	}
	return err
}

func mprotectExec(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	defer unix.Munmap(b)
	return unix.Mprotect(b, unix.PROT_READ|unix.PROT_EXEC)
}
