package kube

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/holder"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

// The host reaches into a run's pods only through the API, never through
// the node (a real cluster's nodes are not this machine): our binary's
// hidden commands (internal/cli/kube_hold.go, internal/holder) run in the
// pods, started by the pod spec or through the pods/exec subresource.
const (
	// ImageBinary is our binary's path in the runtime image.
	ImageBinary = holder.ImageBinary
	// HolderContainer is the container every role's pod gets beside its
	// main one: our image, [HoldCommand], the output volume read-only. It
	// keeps the pod running, and so its output volume in place (the
	// kubelet tears down the volumes of a pod whose containers have all
	// ended), after the main container has exited, so the files the role
	// wrote while it stopped can still be read.
	HolderContainer = "holder"
	// HoldCommand, StopCommand and ReadCommand are the holder's commands
	// (internal/holder).
	HoldCommand = holder.HoldCommand
	StopCommand = holder.StopCommand
	ReadCommand = holder.ReadCommand
	// ReadProblem starts each line ReadCommand writes to stderr about a
	// named file (internal/holder).
	ReadProblem = holder.ReadProblem
)

// HolderArgs, StopArgs and ReadArgs are the holder's command lines
// (internal/holder).
var (
	HolderArgs = holder.HolderArgs
	StopArgs   = holder.StopArgs
	ReadArgs   = holder.ReadArgs
)

// WriteOutput is ReadCommand's work, in the holder, and ValidOutputName
// the names it accepts (internal/holder).
var (
	WriteOutput     = holder.WriteOutput
	ValidOutputName = holder.ValidOutputName
)

// ExecFunc runs a command in a container and copies its output to stdout
// and stderr; it returns when the command has ended.
type ExecFunc func(ctx context.Context, ns, pod, container string, argv []string, stdout, stderr io.Writer) error

// Exec runs argv in a container of a pod through the pods/exec
// subresource, with its output copied to stdout and stderr (either may be
// nil) and no stdin or terminal. A command that exits non-zero is an
// error carrying the end of its stderr.
func (c *Client) Exec(ctx context.Context, ns, pod, container string, argv []string, stdout, stderr io.Writer) error {
	if stdout == nil {
		stdout = io.Discard
	}
	var tail tailBuffer
	errw := io.Writer(&tail)
	if stderr != nil {
		errw = io.MultiWriter(&tail, stderr)
	}
	run := c.apiExec
	if c.exec != nil {
		run = c.exec
	}
	if err := run(ctx, ns, pod, container, argv, stdout, errw); err != nil {
		if msg := strings.TrimSpace(tail.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return fmt.Errorf("exec %s in %s/%s/%s: %w", strings.Join(argv[:min(2, len(argv))], " "), ns, pod, container, err)
	}
	return nil
}

// apiExec streams the exec over a WebSocket (the v5 channel protocol),
// falling back to SPDY when the server refuses the upgrade, as kubectl
// does: WebSockets are the default since Kubernetes 1.31, SPDY is what
// older API servers speak.
func (c *Client) apiExec(ctx context.Context, ns, pod, container string, argv []string, stdout, stderr io.Writer) error {
	if c.cfg == nil {
		return errors.New("the client has no API configuration")
	}
	u := c.execURL(ns, pod, container, argv)
	ws, err := remotecommand.NewWebSocketExecutor(c.cfg, "GET", u.String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(c.cfg, "POST", u)
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr})
}

// execURL is the pods/exec request: the command, stdout and stderr, no
// stdin, no terminal.
func (c *Client) execURL(ns, pod, container string, argv []string) *url.URL {
	return c.cs.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec).
		URL()
}

// tailBuffer keeps the last 4 KiB written: an error's message, not a
// stream a container could make the host hold.
type tailBuffer struct{ b []byte }

const tailMax = 4 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > tailMax {
		t.b = append(t.b[:0], t.b[len(t.b)-tailMax:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(bytes.ToValidUTF8(t.b, []byte("?"))) }

// StopResult is how a service's main container ended at [Client.StopMain].
type StopResult struct {
	// ExitCode is the main container's, -1 when it is not known.
	ExitCode int
	// Killed: it had not ended StopGrace after the signal, and was
	// stopped with its whole pod (activeDeadlineSeconds: SIGTERM again,
	// then SIGKILL after the pod's grace period).
	Killed bool
}

// StopOptions bound [Client.StopMain].
type StopOptions struct {
	// Grace is how long the role has after SIGTERM, reporting included
	// (the kubelet notices an exit within about a second).
	Grace time.Duration
	// BeforeKill, when set, runs once the grace has passed and before
	// the pod is stopped as a whole, which tears its volumes down: the
	// caller reads the output files there.
	BeforeKill func(context.Context)
	// KillTimeout bounds the wait after the fallback stop (default 1m).
	KillTimeout time.Duration
}

// StopMain stops a service's main container and keeps its pod, so the
// holder keeps its output volume: [StopCommand] is run in the container
// (SIGTERM to the role, which writes its last lines and exits), and the
// container's end is read from the pod's status. A container that has
// already ended is not signalled again. One that does not end within the
// grace is stopped as [Client.Stop] does, with the whole pod.
func (c *Client) StopMain(ctx context.Context, ns, pod string, o StopOptions) (StopResult, error) {
	if code, ok, err := c.mainEnded(ctx, ns, pod); err != nil || ok {
		return StopResult{ExitCode: code}, err
	}
	execErr := c.Exec(ctx, ns, pod, ContainerName, StopArgs(), nil, nil)
	// The exec may fail once the signal is delivered (the container's
	// processes end with its PID 1): the container's state decides.
	code, err := c.WaitDone(ctx, ns, pod, o.Grace)
	if err == nil {
		return StopResult{ExitCode: code}, nil
	}
	if ctx.Err() != nil {
		return StopResult{ExitCode: -1}, err
	}
	if o.BeforeKill != nil {
		o.BeforeKill(ctx)
	}
	code, err = c.Stop(ctx, ns, pod, cmp.Or(o.KillTimeout, time.Minute))
	res := StopResult{ExitCode: code, Killed: true}
	if err != nil {
		return res, errors.Join(fmt.Errorf("%s/%s did not end within %s of the stop signal", ns, pod, o.Grace), execErr, err)
	}
	return res, nil
}

// mainEnded reports the main container's exit code once it has ended.
func (c *Client) mainEnded(ctx context.Context, ns, pod string) (int, bool, error) {
	p, err := c.Pod(ctx, ns, pod)
	if err != nil {
		return -1, false, err
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == ContainerName && s.State.Terminated != nil {
			return int(s.State.Terminated.ExitCode), true, nil
		}
	}
	return -1, false, nil
}

// ReadOutput runs [ReadCommand] in the pod's holder: the named files of
// dir (the output volume's mount path), each up to limit bytes, as a tar
// written to w. It returns what the command said about the files
// ([ReadProblem] lines) and its other stderr lines (a hardening
// degradation) as notes.
func (c *Client) ReadOutput(ctx context.Context, ns, pod, dir string, names []string, limit int64, w io.Writer) (problems, notes []string, err error) {
	var errb tailBuffer
	if err := c.Exec(ctx, ns, pod, HolderContainer, ReadArgs(dir, limit, names), w, &errb); err != nil {
		return nil, nil, err
	}
	for _, l := range strings.Split(errb.String(), "\n") {
		l = strings.TrimSpace(l)
		if r, ok := strings.CutPrefix(l, ReadProblem); ok {
			problems = append(problems, r)
		} else if l != "" {
			notes = append(notes, l)
		}
	}
	return problems, notes, nil
}
