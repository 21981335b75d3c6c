package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/mcpsidecar/mcpsidecar/internal/agent/agentenv"
	"github.com/mcpsidecar/mcpsidecar/internal/harden/hardenpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// Environment variable names the harness sets in containers.
const (
	EnvHardenPolicy  = hardenpolicy.EnvPolicy
	EnvGatewayPolicy = netpolicy.EnvPolicy
	EnvSidecarURL    = agentenv.SidecarURL
	EnvInSandbox     = agentenv.InSandbox
	// EnvCABundle is the host variable naming the PEM bundle of CA
	// certificates the sandbox's image trusts. The host reads it when it
	// builds the image; the roles name it in their hints.
	EnvCABundle = "MCPSIDECAR_CA_BUNDLE"
)

// openAIDomain is the egress rule openai_agents adds.
const openAIDomain = ".openai.com"

// openAIForward are the host variables openai_agents forwards to the agent.
// Only OPENAI_API_KEY is secret; the other two let a run point the agent at
// another OpenAI-compatible endpoint or model.
var openAIForward = []string{agentenv.APIKey, agentenv.BaseURL, agentenv.Model}

// Resolve turns a validated spec into its [Profile]. It is pure: the same
// spec always gives the same profile, and nothing outside is touched.
func Resolve(s *Spec) (*Profile, error) {
	js, hash, err := Normalize(s)
	if err != nil {
		return nil, err
	}
	p := &Profile{
		Schema:       ProfileSchema,
		Spec:         s,
		SpecJSON:     js,
		SpecHash:     hash,
		Capabilities: sortedUnique(s.Capabilities),
		Containers:   map[string]Container{},
		Dockerfile:   Dockerfile,
	}
	if p.SeccompProfile, err = SeccompProfile(); err != nil {
		return nil, err
	}
	p.Credentials = credentials(s)
	if s.Has(CapNetwork) {
		if err := p.resolveGateway(s); err != nil {
			return nil, err
		}
	}
	if s.Has(CapMCPClient) {
		p.addContainer(sidecarContainer())
	}
	p.addContainer(agentContainer(s, p.Credentials))
	if err := p.addMCPServersEnv(s); err != nil {
		return nil, err
	}
	if err := p.finishContainers(); err != nil {
		return nil, err
	}
	p.Ledger = ledger(s, p.Gateway, p.Credentials)
	return p, nil
}

func (p *Profile) resolveGateway(s *Spec) error {
	domains := slices.Clone(s.AllowedDomains)
	if s.Has(CapOpenAIAgents) {
		domains = append(domains, openAIDomain)
	}
	cfg, err := GatewayConfig(domains, s.AllowedIPs)
	if err != nil {
		return err
	}
	p.Gateway = &cfg
	p.SquidConf = SquidConf(cfg)
	p.addContainer(gatewayContainer(cfg, heldByGateway(p.Credentials), relaysTelemetry(s)))
	return nil
}

func (p *Profile) addContainer(c Container) {
	p.Roles = append(p.Roles, c.Role)
	p.Containers[c.Role] = c
}

// finishContainers fills what every role shares and embeds each role's
// hardening policy (and the gateway's policy) as JSON in its environment.
func (p *Profile) finishContainers() error {
	seccompOpt, err := compactSeccomp()
	if err != nil {
		return fmt.Errorf("compacting seccomp profile: %w", err)
	}
	for role, c := range p.Containers {
		applyBaseline(&c, seccompOpt)
		acceptBestEffort(&c, p.Spec.HardeningBestEffort)
		hp, err := json.Marshal(c.Harden)
		if err != nil {
			return fmt.Errorf("encoding %s harden policy: %w", role, err)
		}
		c.Env[EnvHardenPolicy] = string(hp)
		if role == RoleGateway {
			reachHostGateway(&c, p.Gateway)
			gp, err := json.Marshal(p.Gateway)
			if err != nil {
				return fmt.Errorf("encoding gateway policy: %w", err)
			}
			c.Env[EnvGatewayPolicy] = string(gp)
		}
		p.Containers[role] = c
	}
	return nil
}

// reachHostGateway gives the gateway, and only the gateway, the Docker
// host's address for netpolicy.HostGateway when an allowlist entry names
// it with a port ("host.docker.internal:11434"); every other container
// keeps the name black-holed, and the gateway dials the host on the
// entry's port alone.
func reachHostGateway(c *Container, cfg *netpolicy.Config) {
	named := false
	for _, d := range cfg.AllowedDomains {
		if name, _, _ := strings.Cut(d, ":"); name == netpolicy.HostGateway {
			named = true
		}
	}
	if !named {
		return
	}
	for i, h := range c.ExtraHosts {
		if strings.HasPrefix(h, netpolicy.HostGateway+":") {
			c.ExtraHosts[i] = netpolicy.HostGateway + ":host-gateway"
		}
	}
}

// Probe is the agent's container running the probe suite instead of the
// agent: the same hardening, so the report measures the same sandbox.
func (p *Profile) Probe() Container {
	c := cloneContainer(p.Containers[RoleAgent])
	c.Cmd = []string{"probe"}
	c.Harden.Role = RoleProbe
	hp, _ := json.Marshal(c.Harden) // a Policy of plain fields always encodes
	c.Env[EnvHardenPolicy] = string(hp)
	return c
}

// GatewayConfig builds the gateway policy from rules as written: each
// normalised, de-duplicated, and dropped when a wider rule already covers
// it (Squid rejects such overlaps in one dstdomain ACL). Where the seed
// dropped ".x" when "x" was also listed (silently narrowing), the wider
// rule is kept: ".x" means x and its subdomains, as docs/spec.md (The spec) defines it.
func GatewayConfig(domains, ips []string) (netpolicy.Config, error) {
	cfg := netpolicy.NewConfig([]string{}, []string{})
	rules := make([]netpolicy.DomainRule, 0, len(domains))
	for _, d := range domains {
		r, err := netpolicy.ParseDomainRule(d)
		if err != nil {
			return cfg, fmt.Errorf("allowed_domains: %w", err)
		}
		rules = append(rules, r)
	}
	for _, r := range rules {
		if !coveredByOther(r, rules) && !slices.Contains(cfg.AllowedDomains, r.String()) {
			cfg.AllowedDomains = append(cfg.AllowedDomains, r.String())
		}
	}
	for _, s := range ips {
		r, err := netpolicy.ParseIPRule(s)
		if err != nil {
			return cfg, fmt.Errorf("allowed_ip_addresses: %w", err)
		}
		if !slices.Contains(cfg.AllowedIPs, r.String()) {
			cfg.AllowedIPs = append(cfg.AllowedIPs, r.String())
		}
	}
	return cfg, nil
}

// coveredByOther reports whether a different, wider subdomain rule on the
// same port matches everything r matches.
func coveredByOther(r netpolicy.DomainRule, all []netpolicy.DomainRule) bool {
	for _, o := range all {
		if o == r || !o.Subdomains || o.Port != r.Port {
			continue
		}
		if o.Matches(r.Name) && (o.Name != r.Name || !r.Subdomains) {
			return true
		}
	}
	return false
}

// compactSeccomp is the profile as one line, for SecurityOpt.
var compactSeccomp = sync.OnceValues(func() (string, error) {
	b, err := seccompOnce()
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	err = json.Compact(&buf, b)
	return buf.String(), err
})

func sortedUnique(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}
