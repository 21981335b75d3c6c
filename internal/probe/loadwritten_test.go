//go:build linux

package probe

import (
	"bytes"
	"debug/elf"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLoadWritten: a written library maps executable from an ordinary
// directory (a violation, naming it) and is refused on a noexec mount (as
// root, which can make one: a noexec tmpfs); no writable path at all is
// an error, never a pass.
func TestLoadWritten(t *testing.T) {
	old := extraWritable
	extraWritable = nil
	t.Cleanup(func() { extraWritable = old })
	plain := t.TempDir()
	ctx := func(dirs ...string) *Env {
		return &Env{Ctx: &Context{RuntimeTempDirectory: dirs[0], WritablePaths: dirs}}
	}
	r := loadWritten(ctx(plain))
	if r.Outcome != Allowed || !strings.Contains(r.Evidence, plain+" (mmap PROT_EXEC)") {
		t.Errorf("plain directory: %+v, want Allowed naming %s", r, plain)
	}
	r = loadWritten(ctx("/proc/no-such-dir"))
	if r.Outcome != Error {
		t.Errorf("nothing writable: %+v, want Error", r)
	}
	if os.Geteuid() != 0 {
		t.Log("not root: the noexec case needs a mount; proven as root")
		return
	}
	noexecDir := t.TempDir()
	if err := unix.Mount("tmpfs", noexecDir, "tmpfs", unix.MS_NOEXEC|unix.MS_NOSUID|unix.MS_NODEV, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(noexecDir, unix.MNT_DETACH) })
	r = loadWritten(ctx(noexecDir))
	if r.Outcome != Denied || !strings.Contains(r.Evidence, "mprotect PROT_EXEC: permission denied") {
		t.Errorf("noexec mount: %+v, want Denied by mmap and mprotect", r)
	}
	r = loadWritten(ctx(noexecDir, plain))
	if r.Outcome != Allowed || strings.Contains(r.Evidence, "mapped_in="+noexecDir) {
		t.Errorf("one exec path among noexec ones: %+v, want Allowed naming only %s", r, plain)
	}
}

// TestLoadWrittenVolumeBelow: an exec mount below a noexec writable path
// (what an image VOLUME at /tmp/v is) is found in the mount table, written
// to and reported, though the declared path itself refuses (as root,
// which can mount).
func TestLoadWrittenVolumeBelow(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Log("not root: no mount can be made; TestWithMountsBelow proves the walk")
		return
	}
	old := extraWritable
	extraWritable = nil
	t.Cleanup(func() { extraWritable = old })
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOEXEC|unix.MS_NOSUID|unix.MS_NODEV, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	vol := dir + "/v"
	if err := os.Mkdir(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", vol, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(vol, unix.MNT_DETACH) })
	r := loadWritten(&Env{Ctx: &Context{RuntimeTempDirectory: dir, WritablePaths: []string{dir}}})
	if r.Outcome != Allowed || !strings.Contains(r.Evidence, "mapped_in="+vol+" (mmap PROT_EXEC)") {
		t.Errorf("exec mount below a noexec writable path: %+v, want Allowed naming only %s", r, vol)
	}
}

// TestWithMountsBelow: the declared paths first, then each mount point
// at or below one of them, once; mounts elsewhere are not tried.
func TestWithMountsBelow(t *testing.T) {
	ms := parseMountinfo([]byte("1 0 0:1 / / ro - overlay o rw\n" +
		"2 1 0:2 / /tmp rw,noexec - tmpfs t rw\n" +
		"3 2 8:1 /vol/a /tmp/v rw - ext4 /dev/sda rw\n" +
		"4 1 8:1 /vol/b /sandbox-output/sub rw - ext4 /dev/sda rw\n" +
		"5 1 8:1 /vol/c /data rw - ext4 /dev/sda rw\n" +
		"6 1 0:3 / /tmpx rw - tmpfs t rw\n"))
	got := withMountsBelow([]string{"/tmp", "", "/sandbox-work", "/sandbox-output", "/tmp"}, ms)
	want := []string{"/tmp", "/sandbox-work", "/sandbox-output", "/tmp/v", "/sandbox-output/sub"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestTinySharedObject: the written library is a well-formed ELF shared
// object for this machine with one executable segment.
func TestTinySharedObject(t *testing.T) {
	f, err := elf.NewFile(bytes.NewReader(tinySharedObject()))
	if err != nil {
		t.Fatal(err)
	}
	if f.Type != elf.ET_DYN || len(f.Progs) != 1 || f.Progs[0].Flags&elf.PF_X == 0 {
		t.Errorf("type %v, %d segments %+v", f.Type, len(f.Progs), f.Progs)
	}
}
