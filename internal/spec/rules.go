package spec

import (
	"fmt"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// Supported lists the capabilities a spec may name, sorted.
var Supported = []string{CapMCPClient, CapNetwork, CapOpenAIAgents, CapShellAccess}

// requiresNetwork are the capabilities that make no sense without egress.
var requiresNetwork = []string{CapMCPClient, CapOpenAIAgents}

// checkRules applies the spec's rules to what the walk collected.
func (w *walker) checkRules() {
	w.checkCaps()
	network := w.spec.Has(CapNetwork)
	w.checkAllowlist(keyDomains, w.domains, network, func(s string) error {
		_, err := netpolicy.ParseDomainRule(s)
		return err
	})
	w.checkAllowlist(keyIPs, w.ips, network, func(s string) error {
		_, err := netpolicy.ParseIPRule(s)
		return err
	})
	w.warnMasked()
	w.spec.AllowedDomains = values(w.domains)
	w.spec.AllowedIPs = values(w.ips)
	w.checkEnv()
	w.checkCreds()
	w.checkMCPServers()
	w.checkWorkload()
	w.checkTelemetry()
	w.checkBestEffort()
}

func (w *walker) checkCaps() {
	seen := map[string]bool{}
	for _, c := range w.caps {
		path := c.path
		switch {
		case !isSupported(c.val):
			w.add(c.at, path, "unsupported capability %q%s; supported: %s", c.val, didYouMean(c.val), strings.Join(Supported, ", "))
			continue
		case seen[c.val]:
			w.add(c.at, path, "duplicate capability %q", c.val)
			continue
		}
		seen[c.val] = true
		w.spec.Capabilities = append(w.spec.Capabilities, c.val)
	}
	if seen[CapNetwork] {
		return
	}
	reported := map[string]bool{}
	for _, c := range w.caps {
		if isRequiringNetwork(c.val) && !reported[c.val] {
			reported[c.val] = true
			w.add(c.at, c.path, "capability %q requires the network capability", c.val)
		}
	}
}

// checkAllowlist reports allowlists without network (they refine network,
// they never enable it) and each malformed entry.
func (w *walker) checkAllowlist(key string, items []item, network bool, parse func(string) error) {
	if len(items) > 0 && !network {
		w.add(w.seen[key], key, "requires the network capability (allowlists refine network; they never enable it)")
	}
	for _, it := range items {
		if err := parse(it.val); err != nil {
			w.add(it.at, it.path, "%v", err)
		}
	}
}

// warnMasked warns about each IP entry written with host bits set below
// its mask: the seed accepted "10.1.2.3/8" (Python's ip_network with
// strict=False) as 10.0.0.0/8, so it is accepted, but a reader may have
// meant the single address.
func (w *walker) warnMasked() {
	for _, it := range w.ips {
		if r, err := netpolicy.ParseIPRule(it.val); err == nil && r.Masked {
			w.warn(it.at, it.path, "%q has host bits set below its mask; read as the network %s", it.val, r)
		}
	}
}

func isSupported(c string) bool {
	for _, s := range Supported {
		if c == s {
			return true
		}
	}
	return false
}

func isRequiringNetwork(c string) bool {
	for _, s := range requiresNetwork {
		if c == s {
			return true
		}
	}
	return false
}

func values(items []item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.val
	}
	return out
}

func didYouMean(c string) string {
	for _, s := range Supported {
		if strings.EqualFold(c, s) {
			return fmt.Sprintf(" (did you mean %q? names are case-sensitive)", s)
		}
	}
	return ""
}
