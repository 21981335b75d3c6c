package follow

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

// Policy is what the run's gateway allowed (gateway-policy.json, written
// by the harness before the run starts), as the spec keys name it.
type Policy struct {
	AllowedDomains []string `json:"allowed_domains"`
	AllowedIPs     []string `json:"allowed_ip_addresses"`
}

// ReadPolicy reads the run's gateway-policy.json; nil when it cannot.
func ReadPolicy(dir string) *Policy {
	data, err := readSmall(filepath.Join(dir, runs.FileGatewayPolicy), 1<<20)
	if err != nil {
		return nil
	}
	var p Policy
	if json.Unmarshal(data, &p) != nil {
		return nil
	}
	return &p
}

// Fix is what would allow a denied request: the spec line to write, or
// why there is none.
type Fix struct {
	// Line is the TOML line of the spec (sandbox_spec.toml) that would
	// allow it: the run's own list with the entry added.
	Line string `json:"spec_line,omitempty"`
	// Note says what the line opens, or why no line would allow it.
	Note string `json:"note"`
}

// The gateway's reasons (internal/egress check.go) that one spec entry
// answers; each captures the entry.
var (
	reNotInDomains = regexp.MustCompile(`^host (\S+) is not in allowed_domains$`)
	reAddPort      = regexp.MustCompile(`to open this port add "([^"]+)" to allowed_domains$`)
	reNotInIPs     = regexp.MustCompile(`^IP literal (\S+) is not in allowed_ip_addresses$`)
	reRefusedAddr  = regexp.MustCompile(`resolved to a refused address: .*?(\S+) is not in allowed_ip_addresses$`)
	// safeEntry is what an entry may hold to be written into TOML as is:
	// a normalised host name, port or address (the reason is read from a
	// file written inside the sandbox).
	safeEntry = regexp.MustCompile(`^[A-Za-z0-9.:_\-\[\]/*]{1,260}$`)
)

// Allowing says which spec line would allow denied decision e under the
// run's policy p (nil: the list is shown with the entry alone).
func Allowing(e *timeline.Event, p *Policy) Fix {
	if p == nil {
		p = &Policy{}
	}
	r := e.Reason
	if m := reNotInDomains.FindStringSubmatch(r); m != nil {
		return listFix("allowed_domains", p.AllowedDomains, m[1], "allows the host on the default ports (HTTP 80, 443; CONNECT 443)")
	}
	if m := reAddPort.FindStringSubmatch(r); m != nil {
		return listFix("allowed_domains", p.AllowedDomains, m[1], "opens this port for this host only")
	}
	if m := reNotInIPs.FindStringSubmatch(r); m != nil {
		return listFix("allowed_ip_addresses", p.AllowedIPs, m[1], "allows the address itself on the default ports")
	}
	if m := reRefusedAddr.FindStringSubmatch(r); m != nil {
		if _, err := netip.ParseAddr(m[1]); err == nil {
			return listFix("allowed_ip_addresses", p.AllowedIPs, m[1],
				"lets the sandbox reach a non-public address (a softening: the gateway refuses them to keep the host's networks out of reach)")
		}
	}
	switch {
	case strings.HasPrefix(r, "scope "):
		return Fix{Note: "refused by the tool's scope: the [[mcp_servers]] entry of that server decides what its tools may reach"}
	case strings.HasPrefix(r, "squid: "):
		return Fix{Note: "refused by Squid: the log does not say which rule; allowed_domains and allowed_ip_addresses decide"}
	case strings.HasPrefix(r, "resolving "):
		return Fix{Note: "the name did not resolve: no spec line changes that"}
	}
	for _, prefix := range refusedWhatever {
		if strings.Contains(r, prefix) {
			return Fix{Note: "no spec line allows this: the gateway refuses it whatever the spec says (docs/egress.md)"}
		}
	}
	return Fix{Note: "no spec line suggested: the tail does not know this reason (docs/egress.md lists the gateway's)"}
}

// refusedWhatever are parts of the reasons of refusals no spec entry
// lifts (internal/egress): the request's form, a held credential, the
// gateway's capacity or its log.
var refusedWhatever = []string{
	"invalid host", "is not a port number", "user information", "is not proxied", "protocol upgrade",
	"is refused: it makes the upstream echo", "Host header", "Host headers", "held credential",
	"credential placeholder", "gateway at capacity", "not a proxy request", "is not host:port",
	"credential listener", "log is full", "the scope header",
}

// listFix is key = [the run's entries..., entry].
func listFix(key string, have []string, entry, note string) Fix {
	if !safeEntry.MatchString(entry) {
		return Fix{Note: "the entry the reason names has characters no spec entry holds: no line suggested"}
	}
	if slices.Contains(have, entry) {
		return Fix{Note: fmt.Sprintf("%q is already in %s: the denial has another cause", entry, key)}
	}
	quoted := make([]string, 0, len(have)+1)
	for _, h := range have {
		if safeEntry.MatchString(h) {
			quoted = append(quoted, strconv.Quote(h))
		}
	}
	quoted = append(quoted, strconv.Quote(entry))
	return Fix{Line: key + " = [" + strings.Join(quoted, ", ") + "]", Note: note}
}
