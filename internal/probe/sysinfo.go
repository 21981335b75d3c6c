//go:build linux

package probe

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/bits"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// parseStatus reads the "Key:\tvalue" lines of /proc/<pid>/status.
func parseStatus(data []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// selfStatus returns the fields of /proc/self/status.
func selfStatus() (map[string]string, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, err
	}
	return parseStatus(data), nil
}

// capNames are the Linux capabilities by bit, for decoding CapEff.
var capNames = []string{"chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill",
	"setgid", "setuid", "setpcap", "linux_immutable", "net_bind_service", "net_broadcast",
	"net_admin", "net_raw", "ipc_lock", "ipc_owner", "sys_module", "sys_rawio", "sys_chroot",
	"sys_ptrace", "sys_pacct", "sys_admin", "sys_boot", "sys_nice", "sys_resource", "sys_time",
	"sys_tty_config", "mknod", "lease", "audit_write", "audit_control", "setfcap", "mac_override",
	"mac_admin", "syslog", "wake_alarm", "block_suspend", "audit_read", "perfmon", "bpf",
	"checkpoint_restore"}

// decodeCaps turns a capability mask in hex into capability names.
func decodeCaps(hexMask string) ([]string, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(hexMask), 16, 64)
	if err != nil {
		return nil, fmt.Errorf("parsing capability mask %q: %w", hexMask, err)
	}
	names := []string{}
	for v != 0 {
		b := bits.TrailingZeros64(v)
		v &^= 1 << b
		if b < len(capNames) {
			names = append(names, "cap_"+capNames[b])
		} else {
			names = append(names, fmt.Sprintf("cap_%d", b))
		}
	}
	return names, nil
}

// route is one entry of the kernel routing table.
type route struct {
	Iface  string
	Prefix netip.Prefix
	// Gateway is the next hop; invalid for an on-link route.
	Gateway netip.Addr
}

// parseRoutes4 reads /proc/net/route: destination and mask are hex in host
// (little-endian) byte order.
func parseRoutes4(data []byte) ([]route, error) {
	var out []route
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for i, l := range lines {
		f := strings.Fields(l)
		if i == 0 || len(f) < 8 {
			continue
		}
		dst, err1 := hexLE4(f[1])
		gw, err2 := hexLE4(f[2])
		mask, err3 := hexLE4(f[7])
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("parsing /proc/net/route line %d: %q", i+1, l)
		}
		ones := bits.OnesCount32(binary.BigEndian.Uint32(mask[:]))
		r := route{Iface: f[0], Prefix: netip.PrefixFrom(netip.AddrFrom4(dst), ones)}
		if gw != [4]byte{} {
			r.Gateway = netip.AddrFrom4(gw)
		}
		out = append(out, r)
	}
	return out, nil
}

func hexLE4(s string) ([4]byte, error) {
	var a [4]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 4 {
		return a, fmt.Errorf("bad hex address %q", s)
	}
	a[0], a[1], a[2], a[3] = b[3], b[2], b[1], b[0]
	return a, nil
}

// parseRoutes6 reads /proc/net/ipv6_route: destination (32 hex), prefix
// length (hex), ..., device last. Unreachable/reject routes (flag 0x0200)
// are left out: they carry no traffic.
func parseRoutes6(data []byte) ([]route, error) {
	var out []route
	for i, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		if len(f) < 10 {
			continue
		}
		b, err := hex.DecodeString(f[0])
		plen, err2 := strconv.ParseUint(f[1], 16, 8)
		flags, err3 := strconv.ParseUint(f[8], 16, 32)
		if err != nil || err2 != nil || err3 != nil || len(b) != 16 {
			return nil, fmt.Errorf("parsing /proc/net/ipv6_route line %d: %q", i+1, l)
		}
		if flags&0x0200 != 0 || f[9] == "lo" {
			continue
		}
		out = append(out, route{Iface: f[9], Prefix: netip.PrefixFrom(netip.AddrFrom16([16]byte(b)), int(plen))})
	}
	return out, nil
}

// routes returns the routing table of this network namespace.
func routes() ([]route, error) {
	d4, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil, err
	}
	r4, err := parseRoutes4(d4)
	if err != nil {
		return nil, err
	}
	d6, err := os.ReadFile("/proc/net/ipv6_route")
	if err != nil {
		return r4, nil // IPv6 disabled: no IPv6 routes at all
	}
	r6, err := parseRoutes6(d6)
	return append(r4, r6...), err
}

// routeFor returns the route that would carry traffic to addr, if any. It
// inspects the table; it sends nothing (the rule: no probe packet leaves).
func routeFor(rs []route, addr netip.Addr) (route, bool) {
	best, found := route{}, false
	for _, r := range rs {
		if r.Prefix.Addr().Is4() != addr.Is4() || !r.Prefix.Contains(addr) {
			continue
		}
		if !found || r.Prefix.Bits() > best.Prefix.Bits() {
			best, found = r, true
		}
	}
	return best, found
}

// defaultRoutes returns the default routes (0.0.0.0/0, ::/0).
func defaultRoutes(rs []route) []route {
	var out []route
	for _, r := range rs {
		if r.Prefix.Bits() == 0 {
			out = append(out, r)
		}
	}
	return out
}

// parseHosts maps each name of an /etc/hosts file to its addresses.
func parseHosts(data []byte) map[string][]netip.Addr {
	m := map[string][]netip.Addr{}
	for _, l := range strings.Split(string(data), "\n") {
		l, _, _ = strings.Cut(l, "#")
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		a, err := netip.ParseAddr(f[0])
		if err != nil {
			continue
		}
		for _, n := range f[1:] {
			n = strings.ToLower(n)
			m[n] = append(m[n], a)
		}
	}
	return m
}

// unroutable reports whether addr can carry no traffic anywhere: the
// unspecified addresses and 0.0.0.0/8 ("this network", never a destination).
func unroutable(addr netip.Addr) bool {
	addr = addr.Unmap()
	return addr.IsUnspecified() || (addr.Is4() && addr.As4()[0] == 0)
}

// programDirs are searched for external programs (PATH may be unset).
var programDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// findProgram returns the path of the first of names present in the image.
func findProgram(names ...string) string {
	dirs := append(strings.Split(os.Getenv("PATH"), ":"), programDirs...)
	for _, n := range names {
		for _, d := range dirs {
			if d == "" {
				continue
			}
			p := d + "/" + n
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				return p
			}
		}
	}
	return ""
}
