package timeline

import (
	"encoding/json"
	"net/netip"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// Who sent a request the gateway decided on, as far as the run directory
// proves it ([Origins.Of]).
const (
	// OriginSidecar: the decision's scope is the sidecar's ("sidecar/…",
	// which the gateway believes only from the sidecar's own address), or
	// its client address is one the harness recorded for the sidecar.
	OriginSidecar = "sidecar"
	// OriginAgent: not the sidecar (scope "agent", or a client address
	// that is not the sidecar's): the workload's own request.
	OriginAgent = "agent"
	// OriginUnknown: neither can be proved (no scope table and no record
	// of the sidecar's address: an older run directory).
	OriginUnknown = ""
)

// Origins tells a gateway decision sent by the sidecar from one sent by the
// workload. Threat: the correlation id on a decision is the traceparent the
// client sent, and the workload chooses the one the sidecar adopts for its
// call, so an id alone never proves a decision belongs to a tool call.
type Origins struct {
	sidecar map[netip.Addr]bool
}

// maxOriginFileBytes bounds each harness file read for the sidecar's
// addresses.
const maxOriginFileBytes = 1 << 20

// ReadOrigins reads the sidecar's addresses from what the harness wrote in
// runDir when it started the sidecar (mcp-sidecar-start-results.json) and
// when it collected it (mcp-sidecar-metadata.json). Both are the host's
// own files, outside every role's output directory. A missing or invalid
// file leaves the addresses it would have given unknown.
func ReadOrigins(runDir string) Origins {
	o := Origins{sidecar: map[netip.Addr]bool{}}
	type ips struct {
		IPs map[string]string `json:"ip_addresses"`
	}
	add := func(m map[string]string) {
		for _, s := range m {
			if a, err := netip.ParseAddr(s); err == nil {
				o.sidecar[a.Unmap()] = true
			}
		}
	}
	if data, _, err := readSource(runDir, runs.StartResultsFile("sidecar"), maxOriginFileBytes); err == nil {
		var rs []ips
		if json.Unmarshal(data, &rs) == nil {
			for _, r := range rs {
				add(r.IPs)
			}
		}
	}
	if data, _, err := readSource(runDir, runs.FileSidecarMetadata, maxOriginFileBytes); err == nil {
		var r ips
		if json.Unmarshal(data, &r) == nil {
			add(r.IPs)
		}
	}
	return o
}

// SidecarKnown reports whether the sidecar's address is known.
func (o Origins) SidecarKnown() bool { return len(o.sidecar) > 0 }

// Of says who sent the request of gateway decision e: [OriginSidecar],
// [OriginAgent] or [OriginUnknown].
func (o Origins) Of(e *Event) string {
	if e.Scope == "sidecar" || strings.HasPrefix(e.Scope, "sidecar/") {
		return OriginSidecar
	}
	ap, err := netip.ParseAddrPort(e.Client)
	var addr netip.Addr
	if err == nil {
		addr = ap.Addr().Unmap()
	} else if a, err := netip.ParseAddr(e.Client); err == nil {
		addr = a.Unmap()
	}
	if addr.IsValid() && o.sidecar[addr] {
		return OriginSidecar
	}
	if e.Scope != "" || (addr.IsValid() && o.SidecarKnown()) {
		return OriginAgent
	}
	return OriginUnknown
}
