package spec

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// A spec nobody chose (one found in the working directory, which is
// often a repository someone else wrote) must not be able to soften the
// sandbox silently: a shell, a host secret in the agent's environment, a
// route to the writer's server and the user's token added to requests
// there are each one line of TOML. [BeyondDefault] is the measure the
// command line asks the user to trust: what a spec opens that the
// built-in default does not.

// defaultProfile is the built-in spec, resolved once.
var defaultProfile = sync.OnceValues(func() (*Profile, error) {
	s, err := Default()
	if err != nil {
		return nil, err
	}
	return Resolve(s)
})

// BeyondDefault returns the softenings of p that the built-in default
// spec does not make, worded as p's ledger words them: every ledger entry
// the default's ledger lacks (a capability the default does not grant, a
// host variable forwarded, a declared credential, a credential in the
// sandbox, an IP rule), except an allowed_domains entry the default's
// rules already allow (a narrower rule opens nothing new). A spec that
// sets credentials_in_sandbox while declaring no credential still gets
// an entry: the switch is a softening as soon as a credential is added.
// None means p is no softer than the default.
func BeyondDefault(p *Profile) ([]Softening, error) {
	d, err := defaultProfile()
	if err != nil {
		return nil, fmt.Errorf("resolving the built-in spec: %w", err)
	}
	covered := coveredDomainEntries(p.Spec, d.Gateway)
	var out []Softening
	for _, e := range p.Ledger {
		if slices.Contains(d.Ledger, e) || covered[e] {
			continue
		}
		out = append(out, e)
	}
	if p.Spec.CredentialsInSandbox && !slices.ContainsFunc(out, func(e Softening) bool { return e.Capability == keyCredsInSandbox }) {
		out = append(out, Softening{Capability: keyCredsInSandbox, Layer: LayerCreds,
			What: "credentials_in_sandbox = true: any credential the spec gains goes into the agent's environment (none is declared now)"})
	}
	return append(out, codeBeyondDefault(p.Spec)...), nil
}

// codeBeyondDefault is what a spec makes run or speak to the agent that
// the default does not, though no ledger entry opens a layer for it: the
// writer's own workload (their code, with every grant of the sandbox, the
// use of the gateway's held credentials included) and declared MCP
// servers (their tools and descriptions are offered to the agent, which
// reads them as instructions).
func codeBeyondDefault(s *Spec) []Softening {
	var out []Softening
	if w := s.Workload; w != nil {
		out = append(out, Softening{Capability: keyWorkload, Layer: LayerTopology,
			What: fmt.Sprintf("runs the spec's workload, image %q command %q, instead of the built-in agent: its code runs with every grant of this sandbox, the held credentials' use through the gateway included", w.Image, w.Command)})
	}
	for _, m := range s.MCPServers {
		if !m.Default {
			out = append(out, Softening{Capability: CapMCPClient, Layer: LayerTopology,
				What: fmt.Sprintf("declares MCP server %q at %s: its tools and their descriptions are offered to the agent", m.Name, m.URL)})
		}
	}
	for _, v := range s.Env {
		if !v.FromHost && configVariable(v.Name) {
			out = append(out, Softening{Capability: "environment_variables", Layer: LayerEnv,
				What: fmt.Sprintf("sets %s=%q for the agent: a variable the agent reads as its own configuration (its task, its model, where it sends its requests)", v.Name, v.Value)})
		}
	}
	return out
}

// configVariable reports whether the agent or the harness reads a
// variable of this name as configuration: a literal value for one in a
// spec someone else wrote replaces the user's task or model (red team,
// issue 30).
func configVariable(name string) bool {
	return strings.HasPrefix(name, "MCPSIDECAR_") || strings.HasPrefix(name, "OPENAI_")
}

// coveredDomainEntries are the ledger entries of s's allowed_domains
// entries that a rule of the default gateway config already allows: the
// same port, and the same rule or a wider subdomain rule matching the name.
func coveredDomainEntries(s *Spec, def *netpolicy.Config) map[Softening]bool {
	covered := map[Softening]bool{}
	if def == nil || !s.Has(CapNetwork) {
		return covered
	}
	var defRules []netpolicy.DomainRule
	for _, d := range def.AllowedDomains {
		if r, err := netpolicy.ParseDomainRule(d); err == nil {
			defRules = append(defRules, r)
		}
	}
	for _, d := range s.AllowedDomains {
		r, err := netpolicy.ParseDomainRule(d)
		if err != nil || !slices.ContainsFunc(defRules, func(o netpolicy.DomainRule) bool { return allows(o, r) }) {
			continue
		}
		// The wording of ledger's allowed_domains entry (ledger.go).
		covered[Softening{Capability: CapNetwork, Layer: LayerEgress, What: fmt.Sprintf("allowed_domains entry %q", d)}] = true
	}
	return covered
}

// allows reports whether rule o matches everything rule r matches.
func allows(o, r netpolicy.DomainRule) bool {
	if o.Port != r.Port {
		return false
	}
	if o == r {
		return true
	}
	return o.Subdomains && o.Matches(r.Name)
}
