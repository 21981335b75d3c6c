package dockerx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

// VolumeSpec describes one volume to create with the engine's local
// driver. DriverOpts are the driver's options (for a tmpfs volume: type,
// device and o, the mount options).
type VolumeSpec struct {
	Name       string            `json:"name"`
	Labels     map[string]string `json:"labels"`
	DriverOpts map[string]string `json:"driver_opts"`
}

// CreateVolume creates a volume of the local driver. An existing volume
// of that name is an error, never reused: a volume this run did not make
// could hold anything, or be mounted with other options.
func (c *Client) CreateVolume(ctx context.Context, v VolumeSpec) error {
	if _, err := c.api.VolumeInspect(ctx, v.Name, client.VolumeInspectOptions{}); err == nil {
		return fmt.Errorf("creating volume %s: a volume of that name exists already", v.Name)
	} else if !IsNotFound(err) {
		return fmt.Errorf("creating volume %s: %w", v.Name, err)
	}
	_, err := c.api.VolumeCreate(ctx, client.VolumeCreateOptions{Name: v.Name, Driver: "local", DriverOpts: v.DriverOpts, Labels: v.Labels})
	if err != nil {
		return fmt.Errorf("creating volume %s: %w", v.Name, err)
	}
	return nil
}

// VolumeOptions is the driver, its options and the labels the engine
// holds for a volume: its own word on how the volume will be mounted.
func (c *Client) VolumeOptions(ctx context.Context, name string) (driver string, opts, labels map[string]string, err error) {
	res, err := c.api.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	if err != nil {
		return "", nil, nil, fmt.Errorf("inspecting volume %s: %w", name, err)
	}
	return res.Volume.Driver, res.Volume.Options, res.Volume.Labels, nil
}

// RemoveVolume removes a volume; one already gone is not an error.
func (c *Client) RemoveVolume(ctx context.Context, name string) error {
	_, err := c.api.VolumeRemove(ctx, name, client.VolumeRemoveOptions{Force: true})
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("removing volume %s: %w", name, err)
	}
	return nil
}

// ListVolumes lists the volumes carrying labels (Resource.ID is the name).
func (c *Client) ListVolumes(ctx context.Context, labels map[string]string) ([]Resource, error) {
	res, err := c.api.VolumeList(ctx, client.VolumeListOptions{Filters: labelFilters(labels)})
	if err != nil {
		return nil, fmt.Errorf("listing volumes: %w", err)
	}
	out := make([]Resource, 0, len(res.Items))
	for _, v := range res.Items {
		out = append(out, Resource{ID: v.Name, Name: v.Name, Labels: v.Labels})
	}
	return out, nil
}

// ExecError is a command run in a container (Exec) that ended with a
// non-zero exit code.
type ExecError struct {
	Argv     []string
	ExitCode int
}

func (e *ExecError) Error() string {
	return fmt.Sprintf("%s exited with code %d", strings.Join(e.Argv, " "), e.ExitCode)
}

// Exec runs argv in the running container id as user ("" is the
// container's), with no stdin and no terminal, copying its stdout and
// stderr to the writers until it ends. A non-zero exit is an *ExecError.
func (c *Client) Exec(ctx context.Context, id, user string, argv []string, stdout, stderr io.Writer) error {
	if len(argv) == 0 {
		return errors.New("exec: no command")
	}
	cr, err := c.api.ExecCreate(ctx, id, client.ExecCreateOptions{User: user, Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return fmt.Errorf("exec in %s: %w", id, err)
	}
	at, err := c.api.ExecAttach(ctx, cr.ID, client.ExecAttachOptions{})
	if err != nil {
		return fmt.Errorf("exec in %s: starting %s: %w", id, argv[0], err)
	}
	defer at.Close()
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, at.Reader)
		copied <- err
	}()
	select {
	case err = <-copied:
	case <-ctx.Done():
		at.Close()
		<-copied
		return fmt.Errorf("exec in %s: %w", id, ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("exec in %s: reading the output of %s: %w", id, argv[0], err)
	}
	ins, err := c.api.ExecInspect(ctx, cr.ID, client.ExecInspectOptions{})
	if err != nil {
		return fmt.Errorf("exec in %s: %w", id, err)
	}
	if ins.Running {
		return fmt.Errorf("exec in %s: %s still running after its output ended", id, argv[0])
	}
	if ins.ExitCode != 0 {
		return &ExecError{Argv: argv, ExitCode: ins.ExitCode}
	}
	return nil
}
