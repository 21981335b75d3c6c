//go:build linux

package probe

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// unlimited is the threshold above which a cgroup v1 limit means "none"
// (v1 reports a page-rounded int64 max).
const unlimited = int64(1) << 62

// cgroupLimitFiles are the cgroup v2 and v1 files of the pids and memory
// limits.
var cgroupLimitFiles = []string{"/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max",
	"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// Snapshot holds what the suite reads before the role hardens itself:
// the container's cgroup limits, which Docker sets and no in-process policy
// changes, but which the role's Landlock policy may hide (/sys).
type Snapshot struct {
	Files map[string]string
}

// TakeSnapshot reads the cgroup limit files; call it before hardening.
func TakeSnapshot() *Snapshot {
	s := &Snapshot{Files: map[string]string{}}
	for _, p := range cgroupLimitFiles {
		if data, err := os.ReadFile(p); err == nil {
			s.Files[p] = string(data)
		}
	}
	return s
}

// readLimit reads the first readable cgroup limit file, falling back to
// the snapshot taken before hardening: "max" and huge values are -1 (no
// limit).
func readLimit(snap *Snapshot, paths ...string) (int64, string, error) {
	var last error = os.ErrNotExist
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			last = err
			continue
		}
		v, err := parseLimit(string(data))
		return v, p, err
	}
	if snap != nil {
		for _, p := range paths {
			if data, ok := snap.Files[p]; ok {
				v, err := parseLimit(data)
				return v, p + " (read before hardening)", err
			}
		}
	}
	return 0, "", last
}

// parseLimit parses a cgroup limit value; -1 means no limit.
func parseLimit(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return -1, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing cgroup limit %q: %w", s, err)
	}
	if v >= unlimited {
		return -1, nil
	}
	return v, nil
}

// judgeLimit turns a measured limit into a result: none, or above what the
// spec declares, is Allowed (the attack has room).
func judgeLimit(what string, v, declared int64, src string) Result {
	ev := fmt.Sprintf("%s=%d; declared=%d; source=%s", what, v, declared, src)
	switch {
	case v < 0:
		return allowed("No "+what+" limit is set.", ev)
	case declared > 0 && v > declared:
		return allowed(fmt.Sprintf("The %s limit %d is above the declared %d.", what, v, declared), ev)
	}
	return denied(fmt.Sprintf("The %s limit %d holds.", what, v), ev)
}

func pidsLimit(snap *Snapshot, declared int64) Result {
	v, src, err := readLimit(snap, "/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max")
	if err == nil {
		return judgeLimit("pids", v, declared, src)
	}
	var rl unix.Rlimit
	if e := unix.Getrlimit(unix.RLIMIT_NPROC, &rl); e != nil {
		return fromErr("Reading the pids limit", errors.Join(err, e))
	}
	n := int64(rl.Cur)
	if rl.Cur == unix.RLIM_INFINITY {
		n = -1
	}
	return judgeLimit("pids", n, declared, "RLIMIT_NPROC (cgroup unreadable: "+err.Error()+")")
}

func memoryLimit(snap *Snapshot, declared int64) Result {
	v, src, err := readLimit(snap, "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
	if err != nil {
		return errored("The memory cgroup is not readable, so the probe cannot measure.", err.Error())
	}
	return judgeLimit("memory", v, declared, src)
}

// maxWriteTest bounds the file the probe writes to prove the size limit.
const maxWriteTest = 8 << 20

func fileSizeLimit(c *Context) Result {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &rl); err != nil {
		return fromErr("Reading RLIMIT_FSIZE", err)
	}
	if rl.Cur == unix.RLIM_INFINITY {
		return allowed("No file size limit is set.", "RLIMIT_FSIZE=unlimited")
	}
	r := judgeLimit("file size", int64(rl.Cur), c.Limits.FileSizeBytes, "RLIMIT_FSIZE")
	if r.Outcome != Denied || rl.Cur > maxWriteTest {
		return r
	}
	return writePastLimit(c, int64(rl.Cur))
}

// writePastLimit writes one byte more than the limit: the write must fail
// with EFBIG. SIGXFSZ is ignored so the kernel's default action (kill the
// process) does not end the suite; the error is what a Go workload sees.
func writePastLimit(c *Context, limit int64) Result {
	signal.Ignore(syscall.SIGXFSZ)
	for _, d := range c.WritablePaths {
		f, err := os.CreateTemp(d, ".g40-fsize-*")
		if err != nil {
			continue
		}
		_, err = f.Write(make([]byte, limit+1))
		f.Close()
		os.Remove(f.Name())
		ev := fmt.Sprintf("limit=%d; dir=%s; err=%v", limit, d, err)
		if err == nil {
			return allowed("A write past RLIMIT_FSIZE succeeded.", ev)
		}
		if errors.Is(err, syscall.EFBIG) {
			return denied(fmt.Sprintf("The file size limit %d holds: EFBIG.", limit), ev)
		}
		return errored("The write past the limit failed for another reason.", ev)
	}
	return errored("No writable path accepted a file, so the probe cannot measure.", "")
}
