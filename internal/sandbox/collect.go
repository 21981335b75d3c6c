package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/probe"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/verdict"
)

// collect saves the workload's output and every container's logs. A file
// the host refuses to copy (a planted link, a FIFO, too large) is recorded,
// never followed.
func (j *job) collect(ctx context.Context) error {
	j.readOutputVolumes(ctx) // outputvolume.go: output that went to engine volumes
	var errs []error
	if j.running != nil {
		errs = append(errs, j.writeArtifact(runs.FileStdout, j.stdout.Bytes()), j.writeArtifact(runs.FileStderr, j.stderr.Bytes()))
	}
	var roles []string
	for _, c := range j.sess.Containers {
		errs = append(errs, j.collectRole(ctx, c))
		roles = append(roles, c.Step.Role)
	}
	errs = append(errs, j.recordHardening(roles))
	return errors.Join(errs...)
}

func (j *job) collectRole(ctx context.Context, c *orchestrate.Container) error {
	role := c.Step.Role
	if role == orchestrate.RoleGateway && j.o.squid() {
		return j.collectSquid(ctx, c)
	}
	for _, name := range runs.RoleFiles[role] { // copied under the same name
		data, err := j.dir.ReadOutput(role, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			j.meta.ArtifactProblems = append(j.meta.ArtifactProblems, err.Error())
			fmt.Fprintf(j.s.Err, "warning: not collected: %v\n", err)
			continue
		}
		if err := j.writeArtifact(name, data); err != nil {
			return err
		}
	}
	if data, err := j.dir.ReadOutput(role, runs.FileHardenReport); err == nil {
		if err := j.writeArtifact(runs.CollectedHardenReport(role), data); err != nil {
			return err
		}
	}
	switch role {
	case orchestrate.RoleGateway:
		return j.saveLogs(ctx, c, runs.FileGatewayLogs, "", "", nil)
	case orchestrate.RoleSidecar:
		if err := j.saveLogs(ctx, c, runs.FileSidecarLogs, runs.FileSidecarStdout, runs.FileSidecarStderr, nil); err != nil {
			return err
		}
		return j.writeJSON(runs.FileSidecarMetadata, j.containerRecord(c))
	}
	return nil
}

// logRecord is gateway-logs.json / mcp-sidecar-logs.json, as in the seed.
type logRecord struct {
	ReturnCode *int   `json:"returncode"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	// AccessLog is Squid's access log, raw (gateway engine squid).
	AccessLog string `json:"access_log,omitempty"`
}

func (j *job) saveLogs(ctx context.Context, c *orchestrate.Container, jsonName, outName, errName string, accessLog []byte) error {
	var out, errb capBuffer
	if err := j.sess.Engine.Logs(ctx, c.ID, &out, &errb); err != nil {
		return err
	}
	rec := logRecord{ReturnCode: c.ExitCode, Stdout: string(j.redact(out.Bytes())), Stderr: string(j.redact(errb.Bytes())),
		AccessLog: string(j.redact(accessLog))}
	if err := j.writeJSON(jsonName, rec); err != nil {
		return err
	}
	if outName != "" {
		if err := j.writeArtifact(outName, out.Bytes()); err != nil {
			return err
		}
		return j.writeArtifact(errName, errb.Bytes())
	}
	return nil
}

// containerRecord is mcp-sidecar-metadata.json.
func (j *job) containerRecord(c *orchestrate.Container) map[string]any {
	aliases := []string{}
	networks := []string{}
	for _, a := range c.Step.Spec.Networks {
		networks = append(networks, a.Network)
		aliases = append(aliases, a.Aliases...)
	}
	return map[string]any{"role": c.Step.Role, "name": c.Step.Spec.Name, "id": c.ID, "image": c.Step.Spec.Image,
		"command": c.Step.Spec.Cmd, "networks": networks, "aliases": aliases, "url": "http://mcp-sidecar:8000/mcp",
		"exit_code": c.ExitCode, "peak_memory_bytes": c.PeakMemory(), "ip_addresses": c.IPs}
}

// verdict judges the run from its artifacts. A run that never reached the
// workload has a failed verdict and no further error.
func (j *job) verdict(runErr error) error {
	if j.dir == nil {
		return nil
	}
	j.meta.Credentials, _ = j.credentials()
	v := runs.Verdict{Checks: []runs.Check{}}
	var err error
	switch {
	case j.agentExit == nil:
		v.Checks = append(v.Checks, runs.Check{Name: "workload ran", Detail: errText(runErr, "the workload did not run")})
	case j.own != nil && j.o.Workload == orchestrate.WorkloadAgent:
		v.Checks = append(v.Checks, j.ownVerdict()...) // workload.go
	case j.o.Workload == orchestrate.WorkloadAgent:
		rc := verdict.CheckRunExit(j.dir.Path, *j.agentExit, j.o.Question)
		for _, c := range rc.Checks {
			v.Checks = append(v.Checks, runs.Check{Name: c.Name, OK: c.OK, Detail: c.Detail})
		}
	case j.o.Workload == orchestrate.WorkloadCheck:
		v.Checks = append(v.Checks, j.checkVerdict()...)
	case j.o.Workload == orchestrate.WorkloadProbe:
		var c []runs.Check
		c, err = j.probeVerdict()
		v.Checks = append(v.Checks, c...)
		for _, lc := range j.backend.isolation(j) {
			v.Checks = append(v.Checks, lc)
			if !lc.OK && err == nil {
				err = exitcode.With(exitcode.Violation, fmt.Errorf("%s: %s", lc.Name, lc.Detail))
			}
		}
		if code, _ := exitcode.Of(err); runErr != nil && code != exitcode.Violation {
			err = nil // timed out or interrupted: runErr says so; a missing report follows from it
		}
	}
	if j.sess != nil {
		v.Checks = append(v.Checks, j.hardeningChecks()...)
		v.Checks = append(v.Checks, j.backend.checks(j)...)
		v.Checks = append(v.Checks, j.credentialChecks()...)
		var roles []string
		for _, st := range j.sess.Plan.Containers {
			roles = append(roles, st.Role)
		}
		v.Checks = append(v.Checks, outputCapChecks(j.capOver, roles)...)
		v.Checks = append(v.Checks, j.teardownChecks()...)
	}
	if j.o.Checks != nil {
		v.Checks = append(v.Checks, j.o.Checks(j.dir.Path, &j.meta)...)
	}
	v.OK = len(v.Checks) > 0
	var failed []string
	for _, c := range v.Checks {
		v.OK = v.OK && c.OK
		if !c.OK {
			failed = append(failed, c.Name+": "+c.Detail)
		}
	}
	j.meta.Verdict = v
	if err == nil && runErr == nil && !v.OK {
		err = fmt.Errorf("verdict: failed checks: %s", strings.Join(failed, "; "))
	}
	return err
}

func errText(err error, def string) string {
	if err != nil {
		return firstLine(err.Error())
	}
	return def
}

// probeVerdict reads report.json: a violation anywhere is exit 4.
func (j *job) probeVerdict() ([]runs.Check, error) {
	path := filepath.Join(j.dir.Path, runs.FileProbeReport)
	r, err := probe.LoadReport(path)
	if errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("the probe suite wrote no report (%s)", path)
	}
	if err != nil {
		return []runs.Check{{Name: "report.json written", Detail: err.Error()}}, err
	}
	checks := []runs.Check{{Name: "report.json written", OK: true, Detail: fmt.Sprintf("%d probes", r.Probes())}}
	n := r.Violations()
	checks = append(checks, runs.Check{Name: "no isolation violation", OK: n == 0, Detail: fmt.Sprintf("%d violation(s)", n)})
	if n > 0 {
		return checks, exitcode.With(exitcode.Violation, fmt.Errorf("the probe suite found %d isolation violation(s); see %s", n, filepath.Join(j.dir.Path, runs.FileProbeReport)))
	}
	return checks, nil
}

// probeContext is what the spec declares about the sandbox; the probe
// compares its measurements against it (also written as config.json).
func (j *job) probeContext() *probe.Context {
	c := probe.DefaultContext()
	c.Capabilities = j.profile.Capabilities
	if g := j.profile.Gateway; g != nil {
		c.AllowedDomains, c.AllowedIPs = g.AllowedDomains, g.AllowedIPs
		c.GatewayURL = "http://egress-gateway:3128"
	} else {
		c.GatewayURL = ""
	}
	if _, ok := j.profile.Containers[orchestrate.RoleSidecar]; ok {
		c.SidecarURL = "http://mcp-sidecar:8000/mcp"
	} else {
		c.SidecarURL = ""
	}
	places, _ := j.credentials()
	c.Credentials = probeCredentials(places)
	for _, v := range j.profile.Spec.Env {
		c.SpecVariables = append(c.SpecVariables, v.Name)
	}
	return c
}

// teardownChecks: the record is complete even when the run ended under a
// call in flight. No role was killed at the stop (its last lines could be
// lost; skipped with --keep, where nothing is stopped), and every gateway
// request made for a sidecar tool call has its call in the audit, and
// neither the decision log nor the audit log filled.
func (j *job) teardownChecks() []runs.Check {
	var out []runs.Check
	if !j.o.Keep {
		codes := map[string]*int{}
		for _, c := range j.sess.Containers {
			if c.Step.Workload || (c.Pid == 0 && c.ExitCode == nil && !c.KilledAtStop) {
				continue // the workload, or a service never started
			}
			code := c.ExitCode
			if c.KilledAtStop {
				killed := 128 + 9
				code = &killed
			}
			codes[c.Step.Role] = code
		}
		out = append(out, fromAgentCheck(verdict.RolesStopped(codes)))
	}
	if j.agentExit != nil {
		out = append(out, fromAgentCheck(verdict.SidecarEgress(j.dir.Path)))
	}
	// A log that filled ends the record early, whatever the workload.
	var expect []string
	if j.planned(orchestrate.RoleGateway) {
		expect = append(expect, runs.FileDecisions)
	}
	if j.planned(orchestrate.RoleSidecar) {
		expect = append(expect, runs.FileAudit)
	}
	out = append(out, fromAgentCheck(verdict.LogsNotFull(j.dir.Path, expect...)))
	if j.planned(orchestrate.RoleGateway) {
		out = append(out, fromAgentCheck(verdict.RecordJoined(j.dir.Path, j.recordSources())))
		if !j.o.squid() { // Squid holds no credential and searches nothing
			out = append(out, fromAgentCheck(verdict.HeldValues(j.dir.Path)))
		}
	}
	return out
}

// planned reports whether the run's plan has a container of role.
func (j *job) planned(role string) bool {
	for _, st := range j.sess.Plan.Containers {
		if st.Role == role {
			return true
		}
	}
	return false
}

// recordSources says what the verdict can join the decision log with:
// the built-in gateway's counts, unless Squid is the gateway (it keeps
// none) or the run is kept (its gateway has not exited).
func (j *job) recordSources() verdict.RecordSources {
	switch {
	case j.o.squid():
		return verdict.RecordSources{Why: "the Squid engine keeps no count of the requests it accepted: only the requests the other records name are joined"}
	case j.o.Keep:
		return verdict.RecordSources{Why: "--keep: the gateway has not exited, so it has not counted"}
	}
	return verdict.RecordSources{Counted: true}
}

func fromAgentCheck(c agent.Check) runs.Check {
	return runs.Check{Name: c.Name, OK: c.OK, Detail: c.Detail}
}
