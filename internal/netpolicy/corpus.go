package netpolicy

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
)

// Corpus is the adversarial table of rules, hosts and addresses, with the
// decision expected under [Corpus.Config]. It is data, not code, so that
// the gateway's tests can replay the same cases against a live gateway
// and the two packages can never drift apart.
type Corpus struct {
	Config      Config     `json:"config"`
	DomainRules []RuleCase `json:"domain_rules"`
	IPRules     []RuleCase `json:"ip_rules"`
	Hosts       []HostCase `json:"hosts"`
	Addresses   []AddrCase `json:"addresses"`
}

// RuleCase is one allowed_domains or allowed_ip_addresses entry: Want is
// the canonical form, or Error a substring of the expected error.
type RuleCase struct {
	Input string `json:"input"`
	Want  string `json:"want,omitempty"`
	Error string `json:"error,omitempty"`
	Note  string `json:"note,omitempty"`
}

// HostCase is a request target's host (without port). Invalid hosts are
// refused before any lookup. For a valid host, Allowed is the name-stage
// decision: a name must match a domain rule; an IP literal must be covered
// by allowed_ip_addresses. Rule is the rule that allowed it.
type HostCase struct {
	Input      string `json:"input"`
	Normalized string `json:"normalized,omitempty"`
	Invalid    bool   `json:"invalid,omitempty"`
	Allowed    bool   `json:"allowed"`
	Rule       string `json:"rule,omitempty"`
	Note       string `json:"note,omitempty"`
}

// AddrCase is a resolved address: its [Class] name and whether the
// gateway may dial it ([Policy.CheckAddr]), by which rule if explicit.
type AddrCase struct {
	Addr    string `json:"addr"`
	Class   string `json:"class"`
	Allowed bool   `json:"allowed"`
	Rule    string `json:"rule,omitempty"`
	Note    string `json:"note,omitempty"`
}

//go:embed testdata/adversarial.json
var corpusJSON []byte

// LoadCorpus returns the adversarial corpus (testdata/adversarial.json,
// embedded). Every host in it is under .test, .example or .invalid, or is
// an address literal, so replaying it never sends traffic off the machine
// provided allowed names are resolved by a fake resolver.
func LoadCorpus() (*Corpus, error) {
	dec := json.NewDecoder(strings.NewReader(string(corpusJSON)))
	dec.DisallowUnknownFields()
	var c Corpus
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("decoding adversarial corpus: %w", err)
	}
	return &c, nil
}
