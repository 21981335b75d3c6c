package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// landlockSchema is the schema of the run's landlock-policy.json (the same
// as `mcpsidecar spec resolve` writes, plus what each role enforced).
const landlockSchema = "mcpsidecar.landlock-policies/v1"

// landlockEnforced is one role's entry under "enforced" in
// landlock-policy.json: the Landlock ABI its report says it enforced.
type landlockEnforced struct {
	Source    string `json:"source"`
	ABI       int    `json:"abi"`
	KernelABI int    `json:"kernel_abi"`
	Error     string `json:"error,omitempty"`
}

// landlockDoc is landlock-policy.json: each role's policy and, once the
// roles have run, what each reported enforcing.
func (j *job) landlockDoc() map[string]any {
	policies := map[string]harden.Policy{}
	for _, role := range j.profile.Roles {
		policies[role] = j.profile.Containers[role].Harden
	}
	enforced := map[string]landlockEnforced{}
	for role, h := range j.meta.Hardening {
		enforced[role] = landlockEnforced{Source: h.Source, ABI: h.ABI, KernelABI: h.KernelABI, Error: h.Error}
	}
	return map[string]any{"schema": landlockSchema, "policies": policies, "enforced": enforced}
}

// recordHardening reads each role's harden report after collection into
// run-metadata.json ("hardening", and its degradations into
// "degradations") and landlock-policy.json, and prints it. The report was
// written by the workload in a directory it controls, so it is recorded as
// the role's claim (runs.SourceRoleReport), never as the host's finding.
func (j *job) recordHardening(roles []string) error {
	measured := map[string]harden.Report{}
	for _, role := range roles {
		data, err := j.dir.ReadOutput(role, harden.ReportFile)
		if errors.Is(err, fs.ErrNotExist) {
			continue // the role wrote none (an engine without our harden call)
		}
		h := runs.RoleHardening{Source: runs.SourceRoleReport, Layers: []runs.HardeningLayer{}, Degradations: []string{}}
		var rep harden.Report
		if err == nil {
			rep, err = harden.ParseReport(data)
		}
		if err != nil {
			h.Error = err.Error()
			fmt.Fprintf(j.s.Err, "warning: %s: %s unreadable: %v\n", role, harden.ReportFile, err)
		} else {
			fillHardening(&h, rep)
			measured[role] = rep
		}
		if j.meta.Hardening == nil {
			j.meta.Hardening = map[string]runs.RoleHardening{}
		}
		j.meta.Hardening[role] = h
		for _, d := range h.Degradations {
			j.meta.Degradations = append(j.meta.Degradations, fmt.Sprintf("%s hardening degraded (%s): %s", role, runs.SourceRoleReport, d))
		}
		j.printHardening(role, h)
	}
	j.recordKernel(roles, measured)
	if len(j.meta.Hardening) == 0 {
		return nil
	}
	return j.replaceJSON(runs.FileLandlockPolicy, j.landlockDoc())
}

// recordKernel records, in run-metadata.json's engine section, the
// engine's kernel as one role measured it from inside (the gateway's
// report first: the gateway runs only our code), and prints it in one
// line: the engine's kernel is not this host's when the engine is in a
// VM or elsewhere, so nothing of it is assumed from here.
func (j *job) recordKernel(roles []string, reports map[string]harden.Report) {
	order := append([]string{spec.RoleGateway}, roles...)
	for _, role := range order {
		rep, ok := reports[role]
		if !ok || rep.Kernel.Release == "" {
			continue
		}
		k := rep.Kernel
		j.meta.Engine.Kernel = &runs.Kernel{Source: role + "'s harden report", Release: k.Release, LandlockABI: rep.KernelLandlockABI,
			Seccomp: k.Seccomp, Cgroup: k.Cgroup, MemoryLimitBytes: k.MemoryLimitBytes, PidsLimit: k.PidsLimit, Error: k.Error}
		if !j.o.Quiet {
			fmt.Fprintf(j.s.Err, "engine's kernel (measured inside the %s): %s\n", role, j.meta.Engine.Kernel.Summary())
		}
		return
	}
}

func fillHardening(h *runs.RoleHardening, rep harden.Report) {
	h.ABI, h.KernelABI, h.Error = rep.EnforcedLandlockABI, rep.KernelLandlockABI, rep.Error
	if r := rep.Refused; r != nil {
		h.Refused = &runs.Refusal{Layer: r.Layer, KernelABI: r.KernelABI, Reason: r.Reason}
	}
	for _, l := range rep.Layers {
		h.Layers = append(h.Layers, runs.HardeningLayer{Name: l.Name, Required: l.Required, Enforced: l.Enforced, Detail: l.Detail})
	}
	h.Degradations = append(h.Degradations, rep.Degradations...)
}

// printHardening prints one line per role; degradations always, as
// warnings, the rest unless --quiet.
func (j *job) printHardening(role string, h runs.RoleHardening) {
	if !j.o.Quiet && h.Error == "" {
		var on, off []string
		for _, l := range h.Layers {
			if l.Enforced {
				on = append(on, l.Name)
			} else {
				off = append(off, l.Name)
			}
		}
		line := fmt.Sprintf("hardening %s (%s): Landlock ABI %d enforced (kernel %d); enforced: %s", role, h.Source, h.ABI, h.KernelABI, listOrNone(on))
		if len(off) > 0 {
			line += "; not enforced: " + strings.Join(off, ", ")
		}
		fmt.Fprintln(j.s.Err, line)
	}
	for _, d := range h.Degradations {
		fmt.Fprintf(j.s.Err, "warning: %s hardening degraded (%s): %s\n", role, h.Source, d)
	}
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// replaceJSON rewrites a host artifact written earlier, redacted.
func (j *job) replaceJSON(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	return j.dir.Replace(name, j.redact(append(b, '\n')))
}
