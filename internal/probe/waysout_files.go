//go:build linux

package probe

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// setuidBits writes a file in dir and tries to set S_ISUID or S_ISGID on it
// through each chmod syscall; stat says whether a bit stuck. The file is
// removed whatever happens.
func setuidBits(dir string) Result {
	f, err := os.CreateTemp(dir, ".probe-setuid-*")
	if err != nil {
		// The output directory is not writable: measured by G40 T12.
		return errored("No file could be written in "+dir+" to try on.", err.Error())
	}
	p := f.Name()
	defer os.Remove(p)
	_, _ = f.WriteString("mcpsidecar probe\n")
	tries := []struct {
		name string
		mode uint32
		set  func(uint32) error
	}{
		{"chmod 04755 (os.Chmod)", 0o4755, func(m uint32) error { return os.Chmod(p, fs.FileMode(m&0o777)|os.ModeSetuid) }},
		{"fchmodat 02755", 0o2755, func(m uint32) error { return unix.Fchmodat(unix.AT_FDCWD, p, m, 0) }},
		{"fchmod 06755", 0o6755, func(m uint32) error { return unix.Fchmod(int(f.Fd()), m) }},
		{"fchmodat2 04755", 0o4755, func(m uint32) error { return fchmodat2(p, m) }},
	}
	var stuck, refused []string
	for _, t := range tries {
		_ = os.Chmod(p, 0o644)
		err := t.set(t.mode)
		bits := specialBits(p)
		switch {
		case bits != 0:
			stuck = append(stuck, fmt.Sprintf("%s: mode now %04o", t.name, bits))
		case err == nil:
			refused = append(refused, t.name+": accepted, but the bit was cleared")
		case refusedErr(err) || err == unix.ENOSYS:
			refused = append(refused, t.name+": "+errNote(err))
		default:
			f.Close()
			return errored(t.name+" failed unexpectedly.", errNote(err))
		}
	}
	f.Close()
	ev := strings.Join(append(stuck, refused...), "; ")
	if len(stuck) > 0 {
		return allowed("A setuid or setgid bit was set on a file in "+dir+".", ev)
	}
	return denied("No setuid or setgid bit could be set.", ev)
}

// specialBits returns the setuid and setgid bits of p (as in st_mode).
func specialBits(p string) uint32 {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return 0
	}
	return st.Mode & (unix.S_ISUID | unix.S_ISGID)
}

// fchmodat2 is the Linux 6.6 syscall (x/sys has no wrapper); ENOSYS before.
func fchmodat2(p string, mode uint32) error {
	b, err := unix.BytePtrFromString(p)
	if err != nil {
		return err
	}
	dirfd := unix.AT_FDCWD
	_, _, errno := unix.Syscall6(unix.SYS_FCHMODAT2, uintptr(dirfd), uintptr(unsafe.Pointer(b)), uintptr(mode), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// otherRoles are the run-directory folders of the roles beside the agent,
// and otherArtefacts what those roles and the host write there.
var (
	otherRoles     = []string{"gateway", "sidecar"}
	otherArtefacts = []string{runs.FileDecisions, runs.FileAudit, runs.CollectedHardenReport("gateway"),
		runs.CollectedHardenReport("sidecar"), runs.MetadataFile}
)

// otherRolesOutput looks, from inside, for any way to another role's
// output: in the output directory, in the mount table, and through the
// root of a process in another mount namespace.
func otherRolesOutput(outDir string) Result {
	var found []string
	found = append(found, foreignEntries(outDir)...)
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		found = append(found, foreignMounts(parseMountinfo(data), outDir)...)
	} else {
		return errored("The mount table could not be read.", err.Error())
	}
	found = append(found, foreignRoots()...)
	if len(found) == 0 {
		return denied("No other role's output is visible.", "checked "+outDir+", /proc/self/mountinfo, /proc/*/root")
	}
	return allowed("Another role's output is visible to the workload.", strings.Join(found, "; "))
}

// foreignEntries lists what in outDir belongs to another role, saying for
// each directory whether the probe could create (and remove) a file in it.
func foreignEntries(outDir string) []string {
	var found []string
	for _, name := range append(slices.Clone(otherRoles), otherArtefacts...) {
		p := filepath.Join(outDir, name)
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		note := p
		if fi.IsDir() {
			note += " (" + writableNote(p) + ")"
		}
		found = append(found, note)
	}
	return found
}

// writableNote creates and removes the probe's own temp file in dir.
func writableNote(dir string) string {
	f, err := os.CreateTemp(dir, ".probe-write-*")
	if err != nil {
		return "not writable: " + errNote(err)
	}
	f.Close()
	os.Remove(f.Name())
	return "writable"
}

// mount is one line of /proc/self/mountinfo: the path inside the source
// file system that is mounted (Root) and where (Point).
type mount struct{ Root, Point string }

func parseMountinfo(data []byte) []mount {
	var out []mount
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		out = append(out, mount{Root: unescapeMount(f[3]), Point: unescapeMount(f[4])})
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes of space, tab, newline, backslash.
func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// foreignMounts returns the mounts that lead to another role's output: a
// mount below the output directory, or one whose source folder is named
// for another role or is a sibling of the output directory's own source
// (the run directory's other role folders).
func foreignMounts(ms []mount, outDir string) []string {
	var own string
	for _, m := range ms {
		if m.Point == outDir {
			own = m.Root
		}
	}
	var found []string
	for _, m := range ms {
		switch {
		case m.Point == outDir:
			continue
		case strings.HasPrefix(m.Point, strings.TrimSuffix(outDir, "/")+"/"):
			found = append(found, "mount under the output directory: "+m.Point+" (from "+m.Root+")")
		case slices.Contains(otherRoles, path.Base(m.Root)):
			found = append(found, "mount of another role's folder: "+m.Point+" (from "+m.Root+")")
		case path.Dir(own) != "/" && path.Dir(own) != "." && path.Dir(m.Root) == path.Dir(own):
			found = append(found, "mount beside the output directory's source: "+m.Point+" (from "+m.Root+")")
		}
	}
	return found
}

// foreignRoots returns the processes visible in /proc whose mount namespace
// is not this one and whose root can be listed: a path into another
// container's files.
func foreignRoots() []string {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return nil // unreadable: no process's namespace can be compared
	}
	ents, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range ents {
		if strings.Trim(e.Name(), "0123456789") != "" {
			continue
		}
		ns, err := os.Readlink("/proc/" + e.Name() + "/ns/mnt")
		if err != nil || ns == self {
			continue
		}
		if _, err := os.ReadDir("/proc/" + e.Name() + "/root/"); err == nil {
			found = append(found, "process "+e.Name()+" in mount namespace "+ns+": its root is listable")
		}
	}
	return found
}
