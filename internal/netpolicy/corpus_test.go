package netpolicy

import (
	"net/netip"
	"strings"
	"testing"
)

func loadCorpus(t *testing.T) (*Corpus, *Policy) {
	t.Helper()
	c, err := LoadCorpus()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(c.Config)
	if err != nil {
		t.Fatalf("compiling corpus config: %v", err)
	}
	return c, p
}

func TestCorpusDomainRules(t *testing.T) {
	c, _ := loadCorpus(t)
	for _, tc := range c.DomainRules {
		t.Run(tc.Input, func(t *testing.T) {
			got, err := ParseDomainRule(tc.Input)
			checkRuleCase(t, tc, got.String(), err)
		})
	}
}

func TestCorpusIPRules(t *testing.T) {
	c, _ := loadCorpus(t)
	for _, tc := range c.IPRules {
		t.Run(tc.Input, func(t *testing.T) {
			got, err := ParseIPRule(tc.Input)
			checkRuleCase(t, tc, got.String(), err)
		})
	}
}

func checkRuleCase(t *testing.T, tc RuleCase, got string, err error) {
	t.Helper()
	if tc.Error != "" {
		if err == nil || !strings.Contains(err.Error(), tc.Error) {
			t.Fatalf("got %q, %v; want error containing %q", got, err, tc.Error)
		}
		return
	}
	if err != nil || got != tc.Want {
		t.Fatalf("got %q, %v; want %q", got, err, tc.Want)
	}
}

func TestCorpusHosts(t *testing.T) {
	c, p := loadCorpus(t)
	for _, tc := range c.Hosts {
		t.Run(tc.Input, func(t *testing.T) {
			got, err := NormalizeHost(tc.Input)
			if tc.Invalid {
				if err == nil {
					t.Fatalf("NormalizeHost = %q, want an error", got)
				}
				if _, ok := p.MatchName(tc.Input); ok {
					t.Fatal("MatchName allowed an invalid host")
				}
				return
			}
			if err != nil || got != tc.Normalized {
				t.Fatalf("NormalizeHost = %q, %v; want %q", got, err, tc.Normalized)
			}
			rule, ok := nameStage(p, got)
			if ok != tc.Allowed || rule != tc.Rule {
				t.Fatalf("decision = %q, %v; want %q, %v", rule, ok, tc.Rule, tc.Allowed)
			}
		})
	}
}

// nameStage is the gateway's first check, as HostCase documents it.
func nameStage(p *Policy, host string) (string, bool) {
	if a, err := netip.ParseAddr(host); err == nil {
		return p.AllowsAddr(a)
	}
	return p.MatchName(host)
}

func TestCorpusAddresses(t *testing.T) {
	c, p := loadCorpus(t)
	for _, tc := range c.Addresses {
		t.Run(tc.Addr, func(t *testing.T) {
			a := netip.MustParseAddr(tc.Addr)
			if got := Classify(a).String(); got != tc.Class {
				t.Errorf("Classify = %s, want %s", got, tc.Class)
			}
			rule, reason, ok := p.CheckAddr(a)
			if ok != tc.Allowed || rule != tc.Rule {
				t.Errorf("CheckAddr = %q, %q, %v; want %q, %v", rule, reason, ok, tc.Rule, tc.Allowed)
			}
			if !ok && !strings.Contains(reason, tc.Class) {
				t.Errorf("reason %q does not name the class %s", reason, tc.Class)
			}
		})
	}
}
