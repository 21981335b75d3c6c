package noexec

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// mountEntry is one line of /proc/PID/mountinfo: where it is mounted and
// its per-mount options (noexec, nosuid, ...).
type mountEntry struct {
	point string
	opts  []string
}

func (m mountEntry) has(opt string) bool { return slices.Contains(m.opts, opt) }

// MountPoint is one mount of a mountinfo table: where it is mounted and
// its per-mount options (rw or ro, noexec, nosuid, nodev, ...).
type MountPoint struct {
	Point   string
	Options []string
}

// ParseMountinfo reads a /proc/PID/mountinfo table (proc(5)), in order:
// a later mount at the same point is on top. The launcher checks its own
// with it.
func ParseMountinfo(data string) ([]MountPoint, error) {
	ms, err := parseMountinfo(data)
	if err != nil {
		return nil, err
	}
	out := make([]MountPoint, len(ms))
	for i, m := range ms {
		out[i] = MountPoint{Point: m.point, Options: m.opts}
	}
	return out, nil
}

func readMountinfo(path string) ([]mountEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseMountinfo(string(data))
}

// parseMountinfo reads proc(5)'s mountinfo format: "ID PARENT MAJ:MIN ROOT
// POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS", with spaces,
// tabs, newlines and backslashes in paths escaped as octal.
func parseMountinfo(data string) ([]mountEntry, error) {
	var out []mountEntry
	for i, line := range strings.Split(data, "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 6 {
			return nil, fmt.Errorf("mountinfo line %d: %d fields, want at least 6", i+1, len(f))
		}
		out = append(out, mountEntry{point: unescape(f[4]), opts: strings.Split(f[5], ",")})
	}
	return out, nil
}

// unescape turns the kernel's \NNN octal escapes back into bytes.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
