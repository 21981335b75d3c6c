package harden

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// ReportSchema is the value of [Report.Schema].
const ReportSchema = "mcpsidecar.harden-report/v1"

// ReportFile is the name a role gives its report in its output directory;
// the host merges it into landlock-policy.json and run-metadata.json.
const ReportFile = runs.FileHardenReport

// Report describes what [Apply] enforced. It is written even when Apply
// fails, so the host can show how far it got.
type Report struct {
	Schema string `json:"schema"`
	Role   string `json:"role"`

	KernelLandlockABI int `json:"kernel_landlock_abi"`
	// Kernel is the rest of what was measured of the kernel the role ran
	// on (the engine's), from inside.
	Kernel Kernel `json:"kernel"`
	// EnforcedLandlockABI is the ABI whose rights the ruleset handles (0
	// when no Landlock ruleset was enforced).
	EnforcedLandlockABI int `json:"enforced_landlock_abi"`

	Layers       []LayerStatus `json:"layers"`
	Degradations []string      `json:"degradations"`

	NoNewPrivs     bool     `json:"no_new_privs"`
	DeniedSyscalls []string `json:"denied_syscalls"`
	// MissingPaths are policy paths absent here; they were granted nothing.
	MissingPaths    []string `json:"missing_paths,omitempty"`
	GoMaxProcs      int      `json:"gomaxprocs"`
	GoMemLimitBytes int64    `json:"gomemlimit_bytes"`
	SIGXFSZIgnored  bool     `json:"sigxfsz_ignored"`

	DurationMicros int64  `json:"duration_us"`
	Error          string `json:"error,omitempty"`
	// Refused is the layer the kernel could not enforce and the policy
	// required: the role stopped there (exit code 5).
	Refused *Refusal `json:"refused,omitempty"`
}

// Refusal is a required layer the kernel could not enforce, from an
// [*UnavailableError].
type Refusal struct {
	Layer     string `json:"layer"`
	KernelABI int    `json:"kernel_landlock_abi"`
	Reason    string `json:"reason"`
}

// LayerStatus is one layer's outcome.
type LayerStatus struct {
	Name     string `json:"name"`
	Required bool   `json:"required"` // false when the policy accepts best effort
	Enforced bool   `json:"enforced"`
	Detail   string `json:"detail,omitempty"`
}

// setError records err, and the refused layer when it is an
// [*UnavailableError].
func (r *Report) setError(err error) {
	if err == nil {
		return
	}
	r.Error = err.Error()
	var ue *UnavailableError
	if errors.As(err, &ue) {
		r.Refused = &Refusal{Layer: ue.Layer, KernelABI: ue.KernelABI, Reason: ue.Reason}
	}
}

// WriteReport writes r as dir/[ReportFile]. It refuses to follow a symlink
// at that name: the directory is writable by the workload.
func WriteReport(dir string, r Report) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // reasons contain ">=", kept readable
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("encoding harden report: %w", err)
	}
	path := filepath.Join(dir, ReportFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|runs.NoFollow, 0o644)
	if err != nil {
		return fmt.Errorf("writing harden report: %w", err)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("writing harden report %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing harden report %s: %w", path, err)
	}
	return nil
}

// ParseReport decodes a role's report, as the host collects it from the
// role's output directory. The workload could have rewritten the file, so
// the host treats it as a claim to show, never as proof: the schema is
// checked and unknown fields are refused.
func ParseReport(data []byte) (Report, error) {
	var r Report
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Report{}, fmt.Errorf("decoding harden report: %w", err)
	}
	if r.Schema != ReportSchema {
		return Report{}, fmt.Errorf("decoding harden report: schema %q, want %q", r.Schema, ReportSchema)
	}
	return r, nil
}
