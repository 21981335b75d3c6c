package hardenpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
)

// EnvPolicy is the environment variable that carries a role's [Policy] as
// JSON into its container.
const EnvPolicy = "MCPSIDECAR_HARDEN_POLICY"

// MaxABI is the highest Landlock ABI go-landlock v0.11 (the library
// internal/harden applies the rules with) knows.
const MaxABI = 11

// knownLayers are the layer names a policy may list in BestEffort.
var knownLayers = []string{LayerLandlockFS, LayerLandlockNet, LayerNoSpawn, LayerNoUnix, LayerSyscallDeny,
	LayerNoListen, LayerNoUDP, LayerNoNetlink}

// KnownLayers are the layer names a policy may list in BestEffort.
func KnownLayers() []string { return slices.Clone(knownLayers) }

// PolicyFromEnv reads the policy from [EnvPolicy] through getenv. It reports
// ok=false, and no error, when the variable is unset or empty: that is host
// use, where nothing is applied. A set but malformed policy is an error, so a
// typo never silently turns the hardening off.
func PolicyFromEnv(getenv func(string) string) (p *Policy, ok bool, err error) {
	raw := getenv(EnvPolicy)
	if raw == "" {
		return nil, false, nil
	}
	p, err = ParsePolicy([]byte(raw))
	if err != nil {
		return nil, false, fmt.Errorf("reading %s: %w", EnvPolicy, err)
	}
	return p, true, nil
}

// ParsePolicy decodes a policy strictly (unknown fields are errors) and
// validates it.
func ParsePolicy(data []byte) (*Policy, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Policy
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("decoding policy JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decoding policy JSON: trailing data after the policy object")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Validate reports every problem in p, each naming the field at fault.
func (p *Policy) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if p.Schema != Schema {
		add("schema: got %q, want %q", p.Schema, Schema)
	}
	if p.Role == "" {
		add("role: must not be empty")
	}
	if p.Landlock.MinABI < 0 || p.Landlock.MinABI > MaxABI {
		add("landlock.min_abi: %d is outside 0..%d", p.Landlock.MinABI, MaxABI)
	}
	errs = append(errs, p.Landlock.pathErrors()...)
	errs = append(errs, portErrors("landlock.connect_tcp", p.Landlock.ConnectTCP)...)
	errs = append(errs, portErrors("landlock.bind_tcp", p.Landlock.BindTCP)...)
	for i, l := range p.BestEffort {
		if !slices.Contains(knownLayers, l) {
			add("best_effort[%d]: unknown layer %q (known: %v)", i, l, knownLayers)
		}
	}
	if p.GoMaxProcs < 0 {
		add("gomaxprocs: %d is negative", p.GoMaxProcs)
	}
	if p.GoMemLimitBytes < 0 {
		add("gomemlimit_bytes: %d is negative", p.GoMemLimitBytes)
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid harden policy: %w", errors.Join(errs...))
	}
	return nil
}

// pathErrors checks that every rule path is absolute and clean: a relative
// path would be resolved against whatever the working directory happens to
// be, granting access nobody reviewed.
func (l *Landlock) pathErrors() []error {
	var errs []error
	lists := []struct {
		field string
		paths []string
	}{
		{"landlock.read_only_dirs", l.ReadOnlyDirs},
		{"landlock.read_only_files", l.ReadOnlyFiles},
		{"landlock.read_write_dirs", l.ReadWriteDirs},
		{"landlock.read_write_files", l.ReadWriteFiles},
		{"landlock.exec_files", l.ExecFiles},
		{"landlock.exec_dirs", l.ExecDirs},
	}
	for _, list := range lists {
		for i, path := range list.paths {
			if !filepath.IsAbs(path) || filepath.Clean(path) != path {
				errs = append(errs, fmt.Errorf("%s[%d]: %q is not an absolute, clean path", list.field, i, path))
			}
		}
	}
	return errs
}

// portErrors refuses port 0: in a connect rule it means nothing, in a bind
// rule it would allow binding any ephemeral port.
func portErrors(field string, ports []uint16) []error {
	var errs []error
	for i, port := range ports {
		if port == 0 {
			errs = append(errs, fmt.Errorf("%s[%d]: port 0 is not allowed", field, i))
		}
	}
	return errs
}

// AcceptsBestEffort says whether p accepts layer as best effort: a layer
// the kernel cannot enforce is then a reported degradation, not a stop.
func (p *Policy) AcceptsBestEffort(layer string) bool { return slices.Contains(p.BestEffort, layer) }
