package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/mcpsidecar/mcpsidecar/internal/binarch"
	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/launcher"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/rolebin"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/version"
)

// Bring your own workload (issue 16): the agent-role container runs a
// user's image and command instead of our agent, with every Docker option
// the agent gets, and our static binary mounted read-only as its
// entrypoint: the launcher, which applies the in-process layers and then
// executes the command.

// Pull policies of [OwnWorkload.Pull].
const (
	PullMissing = "missing" // pull the image when the engine lacks it (the default)
	PullNever   = "never"   // never pull: a missing image fails the run
)

// LauncherPath is where the launcher is mounted in a workload container:
// a directory of its own at the root, outside the image's tree.
const LauncherPath = "/.mcpsidecar/mcpsidecar"

// OwnWorkload is `run --image IMAGE [-- CMD ARGS...]` (and `test-sandbox
// --image`). Empty fields fall back to the spec's [workload] table; nil
// Options.Own and no [workload] run our agent.
type OwnWorkload struct {
	Image   string
	Command []string
	Pull    string // PullMissing ("" too) or PullNever
}

// ownRun is the workload a run actually runs, flags over the spec.
type ownRun struct {
	Image   string
	Command []string // the resolved command (the image's own when none was given)
	Source  string   // where the image came from: "--image" or the spec
}

// resolveOwn merges the flags over the spec's [workload]: the flag's image
// wins; the spec's command goes with the spec's image only; without a
// command the image's own entrypoint and command run.
func resolveOwn(flags *OwnWorkload, s *spec.Spec) *ownRun {
	var w spec.Workload
	if s != nil && s.Workload != nil {
		w = *s.Workload
	}
	r := &ownRun{Image: w.Image, Command: w.Command, Source: "the spec's [workload]"}
	if flags != nil && flags.Image != "" {
		if flags.Image != w.Image {
			r.Command = nil
		}
		r.Image, r.Source = flags.Image, "--image"
	}
	if flags != nil && len(flags.Command) > 0 {
		r.Command = flags.Command
	}
	if r.Image == "" {
		return nil
	}
	return r
}

// puller is what an engine needs to pull (the real client; fakes never do).
type puller interface {
	PullImage(ctx context.Context, ref string) error
}

// ensureOwnImage finds the image in the engine, pulling it when missing
// unless the policy is never.
func (j *job) ensureOwnImage(ctx context.Context, ref string) (dockerx.ImageInfo, error) {
	info, ok, err := j.engine.InspectImage(ctx, ref)
	if err != nil || ok {
		return info, err
	}
	pull := PullMissing
	if j.o.Own != nil && j.o.Own.Pull != "" {
		pull = j.o.Own.Pull
	}
	if pull == PullNever {
		return info, exitcode.WithHint(exitcode.Unavailable, fmt.Errorf("workload image %s is not in the engine, and --pull never forbids pulling it", ref),
			"build or load it first (docker images lists what the engine has), e.g. scripts/build-debian-image.sh")
	}
	p, can := j.engine.(puller)
	if !can {
		return info, exitcode.With(exitcode.Unavailable, fmt.Errorf("workload image %s is not in the engine, and this engine cannot pull", ref))
	}
	fmt.Fprintf(j.s.Err, "pulling workload image %s\n", ref)
	if err := p.PullImage(ctx, ref); err != nil {
		return info, exitcode.WithHint(exitcode.Unavailable, fmt.Errorf("workload image %s is not in the engine and could not be pulled: %w", ref, err),
			"without a reachable registry, build or load the image locally (docker build, docker load, scripts/build-debian-image.sh) and run with --pull never")
	}
	info, ok, err = j.engine.InspectImage(ctx, ref)
	if err == nil && !ok {
		err = fmt.Errorf("workload image %s is still missing after the pull", ref)
	}
	return info, err
}

// applyOwn turns the plan's agent-role step into the user's workload:
// the image, the launcher as entrypoint, the command, the launcher
// mounted read-only, and the launcher's environment. Every other Docker
// option of the step (read-only root, cap-drop ALL, no-new-privileges,
// the seccomp profile, limits, tmpfs, black-holed names, the internal
// network only, the non-root user) is the agent's, unchanged. Under
// test-sandbox the probe is the command: our binary, under the same
// launcher, in the user's image.
func (j *job) applyOwn(ctx context.Context, plan *orchestrate.Plan) error {
	own := resolveOwn(j.o.Own, j.spec)
	if own == nil || j.o.Workload == orchestrate.WorkloadCheck {
		return nil // doctor checks our agent's connectivity, whatever the spec runs
	}
	if err := spec.CheckImageRef(own.Image); err != nil {
		return exitcode.With(exitcode.Usage, fmt.Errorf("workload image (%s): %w", own.Source, err))
	}
	info, err := j.ensureOwnImage(ctx, own.Image)
	if err != nil {
		return err
	}
	if err := refuseImageVolumes("workload image", own.Image, info.Volumes); err != nil { // imagevolumes.go
		return err
	}
	i := slices.IndexFunc(plan.Containers, func(st orchestrate.Step) bool { return st.Role == orchestrate.RoleAgent })
	if i < 0 {
		return errors.New("the plan has no agent-role container to run the workload in")
	}
	st := &plan.Containers[i]
	switch {
	case j.o.Workload == orchestrate.WorkloadProbe:
		// The probe suite measures what the launcher applied: it must not
		// stack a policy of its own on top (our image's, which names
		// /mcpsidecar and would hide what the workload may read).
		own.Command = append(append([]string{LauncherPath}, st.Spec.Cmd...), "--unhardened")
		own.Source += "; test-sandbox runs the probe suite in it under the launcher"
	case len(own.Command) == 0:
		own.Command = append(slices.Clone(info.Entrypoint), info.Cmd...)
		if len(own.Command) == 0 {
			return exitcode.With(exitcode.Usage, fmt.Errorf("workload image %s has no entrypoint or command: give one after --, or command in [workload]", own.Image))
		}
	}
	if err := spec.CheckCommand(own.Command); err != nil {
		return exitcode.With(exitcode.Usage, fmt.Errorf("workload command: %w", err))
	}
	bin, err := j.launcherCopy()
	if err != nil {
		return err
	}
	target := DefaultOutputTarget
	for _, m := range st.Spec.Mounts {
		if m.Source == st.OutputDir {
			target = m.Target
		}
	}
	st.Spec.Image = own.Image
	st.Spec.Entrypoint = []string{LauncherPath, "launch", "--"}
	st.Spec.Cmd = slices.Clone(own.Command)
	st.Spec.Mounts = append(st.Spec.Mounts, dockerx.Mount{Source: bin, Target: LauncherPath, ReadOnly: true})
	// Every launcher variable is set here, explicitly: the container's
	// environment overrides the image's ENV, so an image cannot grant
	// itself shell_access or pose as the launcher's second stage.
	shell := "0"
	if j.spec.Has(spec.CapShellAccess) {
		shell = "1"
	}
	env := []dockerx.EnvVar{
		{Name: launcher.EnvSelf, Value: LauncherPath},
		{Name: launcher.EnvShellAccess, Value: shell},
		{Name: launcher.EnvStage, Value: ""},
		{Name: envLaunchReportDir, Value: target},
		{Name: EnvWorkloadOutputDir, Value: target},
	}
	st.Spec.Env = append(slices.DeleteFunc(st.Spec.Env, func(e dockerx.EnvVar) bool {
		return slices.ContainsFunc(env, func(x dockerx.EnvVar) bool { return x.Name == e.Name })
	}), env...)
	// The image's HEALTHCHECK would run beside the launcher, unhardened.
	st.Spec.NoHealthcheck = true
	j.own = own
	j.meta.Degradations = append(j.meta.Degradations, fmt.Sprintf("workload: image %s (from %s), command %q, under the launcher (%s)", own.Image, own.Source, own.Command, LauncherPath))
	return nil
}

// DefaultOutputTarget is the output directory in the container when the
// step names none.
const DefaultOutputTarget = spec.OutputDir

// EnvWorkloadOutputDir tells a workload where its output directory is.
const EnvWorkloadOutputDir = "MCPSIDECAR_OUTPUT_DIR"

// envLaunchReportDir is where the launcher writes its harden report (cli's
// launch command reads it).
const envLaunchReportDir = launcher.EnvReportDir

// launcherCopy writes the binary the image was built from, as it was
// read and checked then, into a private directory of its own and returns
// the copy's path, which the workload's container binds read-only as its
// launcher. Binding the binary's own path instead would let whoever can
// write beside it swap another program in after the check (red team,
// session 38: a stand-in launcher applied nothing, forged the hardening
// report and the verdict passed). On the engine-only path the bind
// becomes the launcher volume, whose digest is checked against the same
// bytes (internal/dockerbackend).
func (j *job) launcherCopy() (string, error) {
	if j.imageBin == nil {
		return "", errors.New("the launcher: no image binary was read")
	}
	if j.launcherDir == "" {
		dir, err := os.MkdirTemp("", "mcpsidecar-launcher-")
		if err != nil {
			return "", fmt.Errorf("the launcher's private copy: %w", err)
		}
		j.launcherDir = dir
		if err := os.WriteFile(filepath.Join(dir, "mcpsidecar"), j.imageBin, 0o555); err != nil {
			return "", fmt.Errorf("the launcher's private copy: %w", err)
		}
	}
	return filepath.Join(j.launcherDir, "mcpsidecar"), nil
}

// removeLauncherCopy removes the launcher's private copy once the run is
// over; a kept workload container keeps it (gc does not know it: it is
// in the system's temporary directory).
func (j *job) removeLauncherCopy() {
	if j.launcherDir == "" || j.o.Keep {
		return
	}
	if err := os.RemoveAll(j.launcherDir); err != nil {
		fmt.Fprintf(j.s.Err, "warning: removing the launcher's copy: %v\n", err)
	}
}

// imageBinary is binaryPath and what kind of binary it is (internal/rolebin).
func (j *job) imageBinary() (rolebin.Choice, error) {
	if p := j.getenv(EnvImageBinary); p != "" {
		abs, err := filepath.Abs(p)
		return rolebin.Choice{Path: abs, Kind: EnvImageBinary}, err
	}
	p, err := os.Executable()
	if err != nil {
		return rolebin.Choice{}, fmt.Errorf("finding this binary (the launcher): %w", err)
	}
	self, err := filepath.EvalSymlinks(p)
	if err != nil {
		return rolebin.Choice{}, err
	}
	return roleBinary(self, j.meta.Engine.OS, j.meta.Engine.Arch)
}

// RoleBinaryDir is where, beside the host binary, a release archive keeps
// the Linux role binaries for the engine's containers:
// linux-amd64/mcpsidecar-role and linux-arm64/mcpsidecar-role (make
// dist). A Windows or macOS host, or a Linux host whose engine has
// another machine, finds the one of the engine's architecture there.
func RoleBinaryDir(goarch string) string { return rolebin.Dir(goarch) }

// roleBinary is the binary that goes into the image for an engine of
// goos/goarch (internal/rolebin): the slim role binary of that machine
// beside self, or in RoleBinaryDir, checked to be self's build; else self
// when the engine runs it (or the engine's machine was not read: another
// backend); else the full Linux binary of an older archive's layout;
// else self, which checkImageBinary then refuses with the reason. A role
// binary found but unusable stops the run (exit 5) naming both files.
func roleBinary(self, goos, goarch string) (rolebin.Choice, error) {
	c, err := rolebin.Choose(self, goos, goarch, version.RoleBinaries)
	if err != nil {
		return c, exitcode.WithHint(exitcode.Unavailable, err, "to put another binary into the image, point "+EnvImageBinary+" at a Linux build of the engine's machine")
	}
	return c, nil
}

// checkImageBinary refuses a binary the engine's machine cannot run (a
// Windows or macOS build, or another architecture's) before an image is
// made of it. path names it in the message.
func (j *job) checkImageBinary(bin []byte, path string) error {
	e := j.meta.Engine
	if e.Arch == "" {
		return nil // not read (another backend: a cluster's kubelet refuses a binary its node cannot run)
	}
	if err := binarch.Check(bin, cmp.Or(e.OS, "linux"), e.Arch); err != nil {
		return exitcode.WithHint(exitcode.Unavailable,
			fmt.Errorf("the binary for the image, %s, cannot run in the engine's containers: %w", path, err),
			fmt.Sprintf("keep the release archive's %s directory beside mcpsidecar, or point %s at a Linux %s build of mcpsidecar (GOOS=linux GOARCH=%s make build), or use an engine of this binary's machine",
				RoleBinaryDir(e.Arch), EnvImageBinary, e.Arch, e.Arch))
	}
	return nil
}
