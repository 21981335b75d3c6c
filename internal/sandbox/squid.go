package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// squidBuildHint is how to get a Squid image without a registry.
const squidBuildHint = "no registry is reachable and the harness never pulls: build the image from the host's Debian squid package with " +
	"scripts/build-squid-image.sh (apt-get install -y squid first), then pass --squid-image " + egress.SquidImage

// squidDegradations are recorded for every run whose gateway is Squid.
var squidDegradations = []string{
	"gateway engine squid: no in-process hardening (Landlock, no-spawn, our seccomp self-filter): Squid is not our binary; " +
		"the container keeps cap-drop ALL, no-new-privileges, the spec's seccomp profile, a read-only root, tmpfs mounts and limits",
	"gateway engine squid: Squid forwards a request whose Host header disagrees with the URI and one with user information, " +
		"and logs result codes only (no rule, no reason): see docs/egress.md, The Squid engine",
}

// squid reports whether the gateway is Squid.
func (o Options) squid() bool { return o.GatewayEngine == orchestrate.EngineSquid }

// checkGateway records the gateway engine and, for Squid, makes sure its
// image is on the engine: it is never pulled (no registry is reachable,
// and a pulled image is not one the run can vouch for).
func (j *job) checkGateway(ctx context.Context) error {
	if j.profile.Gateway == nil {
		if j.o.squid() {
			return exitcode.Usagef("--gateway-engine squid: the spec has no network capability, so the sandbox has no gateway")
		}
		return nil
	}
	if !j.o.squid() {
		j.meta.Gateway = &runs.Gateway{Engine: orchestrate.EngineOurs}
		return nil
	}
	j.meta.Gateway = &runs.Gateway{Engine: orchestrate.EngineSquid, Image: j.o.SquidImage}
	info, ok, err := j.engine.InspectImage(ctx, j.o.SquidImage)
	if err != nil {
		return exitcode.With(exitcode.Unavailable, fmt.Errorf("inspecting the Squid image %s: %w", j.o.SquidImage, err))
	}
	if !ok {
		return exitcode.WithHint(exitcode.Unavailable, fmt.Errorf("the Squid image %s is not on this Docker engine", j.o.SquidImage), squidBuildHint)
	}
	if err := refuseImageVolumes("the Squid image", j.o.SquidImage, info.Volumes); err != nil { // imagevolumes.go
		return err
	}
	for _, d := range squidDegradations {
		j.meta.Degradations = append(j.meta.Degradations, d)
		if !j.o.Quiet {
			fmt.Fprintf(j.s.Err, "warning: %s\n", d)
		}
	}
	return nil
}

// outputOwner is the container user that must own a role's output
// directory: the image's user, or Squid's.
func outputOwner(st orchestrate.Step) (int, int) {
	u, g, ok := strings.Cut(st.Spec.User, ":")
	uid, uerr := strconv.Atoi(u)
	gid, gerr := strconv.Atoi(g)
	if !ok || uerr != nil || gerr != nil {
		return orchestrate.ImageUID, orchestrate.ImageGID
	}
	return uid, gid
}

// collectSquid turns Squid's access log into egress-decisions.jsonl and
// keeps it raw in gateway-logs.json. Nothing else is taken from Squid's
// output directory: a file it wrote there under the decision log's name
// is not the harness's record.
func (j *job) collectSquid(ctx context.Context, c *orchestrate.Container) error {
	raw, err := j.dir.ReadOutput(orchestrate.RoleGateway, egress.SquidAccessLogFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		j.artifactProblem(err)
	}
	if err := j.saveLogs(ctx, c, runs.FileGatewayLogs, "", "", raw); err != nil {
		return err
	}
	j.roleCopies = append(j.roleCopies, roleFile{orchestrate.RoleGateway, egress.SquidAccessLogFile})
	lines, perr := squidDecisions(raw, j.dir.ID)
	if perr != nil {
		j.artifactProblem(fmt.Errorf("converting the Squid access log: %w", perr))
	}
	return j.writeArtifact(runs.FileDecisions, lines)
}

func (j *job) artifactProblem(err error) {
	j.meta.ArtifactProblems = append(j.meta.ArtifactProblems, err.Error())
	fmt.Fprintf(j.s.Err, "warning: %v\n", err)
}

// squidDecisions converts access-log lines to decision lines. A line with
// no method is a connection that sent no request (the harness's TCP
// readiness check among them): our gateway logs none either.
func squidDecisions(raw []byte, runID string) ([]byte, error) {
	ds, err := egress.ParseSquidAccessLog(bytes.NewReader(raw))
	var out bytes.Buffer
	for _, d := range ds {
		if d.Method == "" || d.Method == "-" {
			continue
		}
		d.RunID = runID
		b, merr := json.Marshal(d)
		if merr != nil {
			return out.Bytes(), fmt.Errorf("encoding a decision: %w", merr)
		}
		out.Write(append(b, '\n'))
	}
	return out.Bytes(), err
}
