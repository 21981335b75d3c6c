package dockerx

import (
	"context"
	"io"
)

// Engine is the narrow set of Docker operations the harness uses. [Client]
// implements it against a real daemon; tests substitute a fake.
type Engine interface {
	Version(ctx context.Context) (EngineVersion, error)
	// Info is the engine's machine and mode: architecture, rootless,
	// which resource limits it can enforce (engineinfo.go).
	Info(ctx context.Context) (EngineInfo, error)

	InspectImage(ctx context.Context, ref string) (ImageInfo, bool, error)
	// BuildImage runs the classic builder (no BuildKit session needed).
	BuildImage(ctx context.Context, img ImageFiles) error
	// ImportImage makes the same image from a root-filesystem tarball,
	// with no builder at all.
	ImportImage(ctx context.Context, img ImageFiles) error

	CreateNetwork(ctx context.Context, n NetworkSpec) (string, error)
	RemoveNetwork(ctx context.Context, id string) error
	ListNetworks(ctx context.Context, labels map[string]string) ([]Resource, error)

	CreateContainer(ctx context.Context, c ContainerSpec) (string, error)
	// WaitContainer must be called before StartContainer so that a fast
	// exit is not missed; the channel yields the exit code once.
	WaitContainer(ctx context.Context, id string) <-chan WaitResult
	StartContainer(ctx context.Context, id string) error
	// AttachContainer streams the container's stdout and stderr into the
	// writers until it exits or ctx ends; call it before StartContainer.
	AttachContainer(ctx context.Context, id string, stdout, stderr io.Writer) (done <-chan error, err error)
	Logs(ctx context.Context, id string, stdout, stderr io.Writer) error
	InspectContainer(ctx context.Context, id string) (ContainerState, error)
	KillContainer(ctx context.Context, id, signal string) error
	RemoveContainer(ctx context.Context, id string) error
	ListContainers(ctx context.Context, labels map[string]string) ([]Resource, error)
	// CreateVolume, VolumeOptions, RemoveVolume and ListVolumes manage
	// the local driver's volumes that hold the roles' output (volumes.go).
	CreateVolume(ctx context.Context, v VolumeSpec) error
	VolumeOptions(ctx context.Context, name string) (driver string, opts, labels map[string]string, err error)
	RemoveVolume(ctx context.Context, name string) error
	ListVolumes(ctx context.Context, labels map[string]string) ([]Resource, error)
	// Exec runs a command in a running container and copies its output;
	// a non-zero exit is an *ExecError.
	Exec(ctx context.Context, id, user string, argv []string, stdout, stderr io.Writer) error
	// PeakMemory follows the container's memory statistics until it exits
	// or ctx ends; the returned function reports the highest usage seen.
	PeakMemory(ctx context.Context, id string) func() uint64

	// Locality says whether the engine's process ids are this host's,
	// decided once, on the first call.
	Locality(ctx context.Context) Locality
	// Process proves that st.Pid, which the engine reported for the
	// running container id (st is its inspect), is that container's
	// process on this host, and holds it ([Prove]); on an engine that is
	// not local it proves nothing and fails. The error wraps
	// [ErrNotOnThisHost] or [ErrProcessGone].
	Process(ctx context.Context, id string, st ContainerState) (Process, error)
}

// WaitResult is the end of a container: its exit code or why waiting failed.
type WaitResult struct {
	ExitCode int
	Err      error
}
