package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/probe"
	"github.com/mcpsidecar/mcpsidecar/internal/redact"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/termtext"
	"github.com/mcpsidecar/mcpsidecar/internal/verdict"
)

// collect saves the workload's output and every container's logs, from
// the run directory where the backend's stop left each role's files. A
// file the host refuses to copy (a planted link, a FIFO, too large) is
// recorded, never followed.
func (j *job) collect(ctx context.Context) error {
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
		if err := j.writeRedacted(role, name, name, data); err != nil {
			return err
		}
	}
	if data, err := j.dir.ReadOutput(role, runs.FileHardenReport); err == nil {
		if err := j.writeRedacted(role, runs.FileHardenReport, runs.CollectedHardenReport(role), data); err != nil {
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

// writeRedacted writes raw, read from role/name, as the artifact dst with
// the run's secrets removed, and notes role/name for redactRoleCopies.
func (j *job) writeRedacted(role, name, dst string, raw []byte) error {
	if err := j.writeArtifact(dst, raw); err != nil {
		return err
	}
	j.roleCopies = append(j.roleCopies, roleFile{role, name})
	return nil
}

// roleFile is a file collect read from a role's folder of the run
// directory.
type roleFile struct{ role, name string }

// redactRoleCopies writes the run's redaction over each file collect read
// from a role's folder, once the verdict has searched them: the folder is
// part of the record a user keeps and shares, so its raw copy must not
// hold what the artifacts removed (a secret the workload put into its
// relayed telemetry, a URL, its answer), and the verdict's search for a
// value the gateway held reads those folders as the containers wrote
// them (verdict.HeldStayed: a leak it found stays a failed check, named
// with the file it was in). A failure is an artifact problem.
func (j *job) redactRoleCopies() {
	for _, f := range j.roleCopies {
		raw, err := j.dir.ReadOutput(f.role, f.name)
		if err != nil {
			continue // gone or refused: what collect recorded stands
		}
		red := j.redact(raw)
		if bytes.Equal(raw, red) {
			continue
		}
		if err := j.dir.ReplaceOutput(f.role, f.name, red); err != nil {
			j.artifactProblem(fmt.Errorf("the raw copy keeps a secret value: %w", err))
		}
	}
	j.roleCopies = nil
	j.reportRawSecrets()
}

// reportRawSecrets searches the roles' folders, once the files the
// harness collected are redacted, for a secret value of the run in any
// of its forms, and records each file that holds one: a file the harness
// does not collect (a workload's own output) is the workload's data and
// is kept as written, never silently changed, but the user is told it
// holds a secret before sharing the record (red team, session 39, F2).
// The value is never named, only the file.
func (j *job) reportRawSecrets() {
	if j.sess == nil || len(j.secrets) == 0 {
		return
	}
	var values []verdict.HeldValue
	for _, s := range j.secrets {
		for _, f := range redact.Forms(s) {
			values = append(values, verdict.HeldValue{Variable: "secret", Value: f})
		}
	}
	if len(values) == 0 {
		return // only short secrets: removed as tokens, not searched for
	}
	seen := map[string]bool{}
	for _, st := range j.sess.Plan.Containers {
		if seen[st.Role] {
			continue
		}
		seen[st.Role] = true
		var files []string
		_, err := verdict.SearchDir(filepath.Join(j.dir.Path, st.Role), values, func(rel, _ string) {
			if p := filepath.Join(st.Role, rel); !slices.Contains(files, p) {
				files = append(files, p)
			}
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			j.artifactProblem(fmt.Errorf("searching %s/ for secret values: %w", st.Role, err))
		}
		for _, f := range files {
			j.artifactProblem(fmt.Errorf("%s holds a secret value of the run: the workload wrote it there, and the file is kept as written (the harness redacts only the files it collects); remove it before you share the run directory", termtext.Clean(f)))
		}
	}
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
	var out, errb Capture
	if err := j.backend.Logs(ctx, j.run, c, &out, &errb); err != nil {
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
