package spec

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/harden/hardenpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// Artifact file names, as written by `spec resolve --out` and to each run
// directory.
const (
	FileSpec          = runs.FileSandboxSpec
	FileProfile       = runs.FileResolvedProfile
	FileSeccomp       = runs.FileSeccompProfile
	FileLandlock      = runs.FileLandlockPolicy
	FileGatewayPolicy = runs.FileGatewayPolicy
	FileSquidConf     = runs.FileSquidConf
	FileDockerfile    = runs.FileDockerfile
	FileLedger        = runs.FileLedger
)

// seccompRef replaces the inline profile in resolved-profile.json: the
// profile itself is seccomp-profile.json.
const seccompRef = "seccomp=" + FileSeccomp

// Artifacts renders every file a profile resolves into, by file name.
// gateway-policy.json and squid.conf exist only with network.
func Artifacts(p *Profile) (map[string][]byte, error) {
	out := map[string][]byte{
		FileSeccomp:    p.SeccompProfile,
		FileDockerfile: []byte(p.Dockerfile),
	}
	add := func(name string, v any) error {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding %s: %w", name, err)
		}
		out[name] = append(b, '\n')
		return nil
	}
	docs := map[string]any{
		FileSpec:     specDoc(p),
		FileProfile:  profileDoc(p),
		FileLandlock: landlockDoc(p),
		FileLedger:   map[string]any{"schema": "mcpsidecar.softening-ledger/v1", "entries": nonNil(p.Ledger)},
	}
	if p.Gateway != nil {
		docs[FileGatewayPolicy] = p.Gateway
		out[FileSquidConf] = []byte(p.SquidConf)
	}
	for _, name := range slices.Sorted(maps.Keys(docs)) {
		if err := add(name, docs[name]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// specDocument is sandbox-spec.json: the validated spec, its source and
// its normalised hash.
type specDocument struct {
	Schema         string `json:"schema"`
	Source         string `json:"source"`
	NormalizedHash string `json:"normalized_hash"`
	Normalized     string `json:"normalized_json"`
	*Spec
}

func specDoc(p *Profile) specDocument {
	s := *p.Spec
	s.Capabilities = nonNil(s.Capabilities)
	s.AllowedDomains = nonNil(s.AllowedDomains)
	s.AllowedIPs = nonNil(s.AllowedIPs)
	s.Env = nonNil(s.Env)
	return specDocument{Schema: "mcpsidecar.sandbox-spec/v1", Source: p.Spec.Source,
		NormalizedHash: p.SpecHash, Normalized: p.SpecJSON, Spec: &s}
}

// profileDoc is the profile with each container's inline seccomp JSON
// replaced by a reference to seccomp-profile.json.
func profileDoc(p *Profile) *Profile {
	q := *p
	q.Containers = map[string]Container{}
	for role, c := range p.Containers {
		c.SecurityOpt = slices.Clone(c.SecurityOpt)
		for i, o := range c.SecurityOpt {
			if strings.HasPrefix(o, "seccomp=") {
				c.SecurityOpt[i] = seccompRef
			}
		}
		q.Containers[role] = c
	}
	q.Ledger = nonNil(q.Ledger)
	return &q
}

// landlockDoc is landlock-policy.json: each role's hardening policy,
// including the probe's.
func landlockDoc(p *Profile) map[string]any {
	pol := map[string]hardenpolicy.Policy{}
	for role, c := range p.Containers {
		pol[role] = c.Harden
	}
	pol[RoleProbe] = p.Probe().Harden
	return map[string]any{"schema": "mcpsidecar.landlock-policies/v1", "policies": pol}
}
