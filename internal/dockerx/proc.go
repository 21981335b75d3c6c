package dockerx

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ProcStatus is what the host reads of a container process in
// /proc/<pid>/status: the kernel's own account of its restrictions, which
// the process cannot forge (unlike a report it writes).
type ProcStatus struct {
	Seccomp        int    `json:"seccomp"`         // 2: filter mode
	SeccompFilters int    `json:"seccomp_filters"` // filters stacked on the process
	NoNewPrivs     bool   `json:"no_new_privs"`
	CapEff         uint64 `json:"cap_eff"`
	CapPrm         uint64 `json:"cap_prm"`
	UID            int    `json:"uid"` // effective, in the host's user namespace
}

func parseProcStatus(text string) (ProcStatus, error) {
	var st ProcStatus
	seen := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			continue
		}
		var err error
		switch key {
		case "Seccomp":
			st.Seccomp, err = strconv.Atoi(f[0])
		case "Seccomp_filters":
			st.SeccompFilters, err = strconv.Atoi(f[0])
		case "NoNewPrivs":
			st.NoNewPrivs = f[0] == "1"
		case "CapEff":
			st.CapEff, err = strconv.ParseUint(f[0], 16, 64)
		case "CapPrm":
			st.CapPrm, err = strconv.ParseUint(f[0], 16, 64)
		case "Uid":
			if len(f) > 1 {
				st.UID, err = strconv.Atoi(f[1])
			}
		default:
			continue
		}
		if err != nil {
			return st, fmt.Errorf("reading %s in process status: %w", key, err)
		}
		seen[key] = true
	}
	for _, k := range []string{"Seccomp", "NoNewPrivs", "CapEff", "Uid"} {
		if !seen[k] {
			return st, fmt.Errorf("process status has no %s line", k)
		}
	}
	return st, nil
}

// BridgeAddrs lists the host's addresses on the bridge of the network with
// the given ID (Docker names a user-defined bridge br-<first 12 of the ID>).
func BridgeAddrs(networkID string) ([]string, error) {
	if len(networkID) < 12 {
		return nil, fmt.Errorf("network id %q is too short", networkID)
	}
	ifi, err := net.InterfaceByName("br-" + networkID[:12])
	if err != nil {
		return nil, fmt.Errorf("finding the bridge of network %s: %w", networkID[:12], err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("listing the addresses of %s: %w", ifi.Name, err)
	}
	out := []string{}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			out = append(out, ipn.String())
		}
	}
	return out, nil
}
