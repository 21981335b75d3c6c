//go:build linux

package noexec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Held is a directory [Mount] made noexec, and the lock that tells
// [Sweep] its owner still runs.
type Held struct {
	Dir string
	fd  int
}

// Error is a mount step that failed; Err is the kernel's answer (EPERM
// without CAP_SYS_ADMIN).
type Error struct {
	Op  string
	Dir string
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("%s %s: %v", e.Op, e.Dir, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// remountFlags are the flags the bind gets; the atime and read-only flags
// of the mount it lies on are kept (see keptFlags).
const remountFlags = unix.MS_REMOUNT | unix.MS_BIND | unix.MS_NOEXEC | unix.MS_NOSUID | unix.MS_NODEV

// Mount bind-mounts dir onto itself and remounts the bind noexec, nosuid
// and nodev, checks the result with statfs, and takes a shared lock on
// the directory that lasts until [Held.Release] (or this process's end).
// dir must be an absolute, clean path to a directory that is not already
// a mount point. On any failure nothing stays mounted.
func Mount(dir string) (*Held, error) {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return nil, &Error{Op: "making noexec", Dir: dir, Err: errors.New("not an absolute, clean path")}
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, &Error{Op: "making noexec", Dir: dir, Err: err}
	}
	if !fi.IsDir() {
		return nil, &Error{Op: "making noexec", Dir: dir, Err: errors.New("not a directory")}
	}
	if mounted, err := isMountPoint(dir); err != nil || mounted {
		if err == nil {
			err = errors.New("already a mount point; refusing to stack a mount on one this run did not make")
		}
		return nil, &Error{Op: "making noexec", Dir: dir, Err: err}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, &Error{Op: "reading the mount flags of", Dir: dir, Err: err}
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return nil, &Error{Op: "bind-mounting", Dir: dir, Err: err}
	}
	h, err := finishMount(dir, remountFlags|keptFlags(st.Flags))
	if err != nil {
		_ = unix.Unmount(dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		return nil, err
	}
	return h, nil
}

func finishMount(dir string, flags uintptr) (*Held, error) {
	if err := unix.Mount("", dir, "", flags, ""); err != nil {
		return nil, &Error{Op: "remounting noexec,nosuid,nodev", Dir: dir, Err: err}
	}
	if err := Check(dir); err != nil {
		return nil, err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, &Error{Op: "opening", Dir: dir, Err: err}
	}
	if err := unix.Flock(fd, unix.LOCK_SH); err != nil {
		unix.Close(fd)
		return nil, &Error{Op: "locking", Dir: dir, Err: err}
	}
	return &Held{Dir: dir, fd: fd}, nil
}

// keptFlags are the flags of the underlying mount a bind remount must
// repeat: without them a read-only or noatime mount would change.
func keptFlags(st int64) uintptr {
	var f uintptr
	for _, m := range []struct {
		st int64
		ms uintptr
	}{{unix.ST_RDONLY, unix.MS_RDONLY}, {unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME}} {
		if st&m.st != 0 {
			f |= m.ms
		}
	}
	return f
}

// Release unmounts the directory (MNT_DETACH: a container still holding it
// keeps its own copy) and drops the lock. The files stay in the directory
// underneath. Releasing twice, or a mount already gone, is not an error.
func (h *Held) Release() error {
	if h == nil || h.fd < 0 {
		return nil
	}
	err := unix.Unmount(h.Dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
	if errors.Is(err, unix.EINVAL) {
		err = nil // no longer a mount point (gc took it)
	}
	unix.Close(h.fd)
	h.fd = -1
	if err != nil {
		return &Error{Op: "unmounting", Dir: h.Dir, Err: err}
	}
	return nil
}

// NotNoexecError is a path whose mount lets files be mapped executable.
type NotNoexecError struct{ Path string }

func (e *NotNoexecError) Error() string {
	return fmt.Sprintf("%s is not on a noexec mount: a file written there can be mapped executable", e.Path)
}

// Check reports whether path lies on a noexec mount (statfs ST_NOEXEC):
// nil if so, a *NotNoexecError if not.
func Check(path string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", path, err)
	}
	if st.Flags&unix.ST_NOEXEC == 0 {
		return &NotNoexecError{Path: path}
	}
	return nil
}

// SeenIn checks, from the host, that target is a noexec mount in a
// container's mount namespace, given its init's mountinfo table (read by
// the host through a proven process, dockerx.Process.Mountinfo): the
// answer of the kernel the container runs in, whatever the daemon's
// namespace.
func SeenIn(mountinfo []byte, target string) error {
	ms, err := parseMountinfo(string(mountinfo))
	if err != nil {
		return err
	}
	var found *mountEntry
	for i := range ms {
		if ms[i].point == target {
			found = &ms[i] // the last one is on top
		}
	}
	if found == nil {
		return fmt.Errorf("%s is not a mount point in the container", target)
	}
	if !found.has("noexec") {
		return &NotNoexecError{Path: target + " (in the container, mounted " + strings.Join(found.opts, ",") + ")"}
	}
	return nil
}

// isMountPoint reports whether dir is the mount point of a mount in this
// process's namespace.
func isMountPoint(dir string) (bool, error) {
	ms, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.point == dir {
			return true, nil
		}
	}
	return false, nil
}

// Sweep unmounts what [Mount] left below runsDir when its process died
// without releasing (SIGKILL, a crash): the noexec mounts of
// runsDir/run-*/ROLE whose lock nobody holds. A live run's mounts are
// locked and left alone. It returns the mount points it removed.
func Sweep(runsDir string) ([]string, error) {
	root, err := filepath.Abs(runsDir)
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("resolving the runs directory %s: %w", runsDir, err)
	}
	ms, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	seen := map[string]bool{}
	for _, m := range ms {
		if seen[m.point] || !ours(root, m) {
			continue
		}
		seen[m.point] = true
		switch gone, err := unmountIfOrphaned(m.point); {
		case err != nil:
			errs = append(errs, err)
		case gone:
			removed = append(removed, m.point)
		}
	}
	return removed, errors.Join(errs...)
}

// ours: a noexec mount exactly two levels below the runs directory, in a
// run directory (runs.Create names them run-*).
func ours(root string, m mountEntry) bool {
	rel, err := filepath.Rel(root, m.point)
	if err != nil || strings.HasPrefix(rel, "..") {
		return false
	}
	parts := strings.Split(rel, string(filepath.Separator))
	return len(parts) == 2 && strings.HasPrefix(parts[0], "run-") && m.has("noexec")
}

// unmountIfOrphaned takes the directory's lock without waiting: held, the
// owning run is alive; free, the owner is gone and the mount is removed.
func unmountIfOrphaned(point string) (bool, error) {
	fd, err := unix.Open(point, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false, &Error{Op: "opening", Dir: point, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil // a live run holds it
		}
		return false, &Error{Op: "locking", Dir: point, Err: err}
	}
	if err := unix.Unmount(point, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
		return false, &Error{Op: "unmounting", Dir: point, Err: err}
	}
	return true, nil
}
