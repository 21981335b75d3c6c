package dockerx

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Client is an [Engine] backed by the Docker daemon named by DOCKER_HOST.
type Client struct {
	api *client.Client

	localOnce sync.Once
	local     Locality

	infoMu sync.Mutex
	info   *EngineInfo // the engine's /info, once asked (engineinfo.go)
	kernel string      // its KernelVersion
}

var _ Engine = (*Client)(nil)
var _ Pusher = (*Client)(nil)

// New connects lazily to the daemon configured by the environment
// (DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH), or, without
// DOCKER_HOST, by the Docker CLI context in use (DOCKER_CONTEXT, or the
// config's currentContext), as the docker command picks it. An ssh://
// address is reached as the docker command reaches it: `docker system
// dial-stdio` on that host, over ssh.
func New() (*Client, error) {
	opts := []client.Opt{client.FromEnv}
	host, err := contextHost(os.Getenv, dockerConfigDir(os.Getenv)) // DOCKER_CONTEXT, docker context use
	if err != nil {
		return nil, err
	}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	if host == "" {
		host = os.Getenv("DOCKER_HOST")
	}
	if strings.HasPrefix(host, "ssh://") {
		args, err := sshArgs(host)
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.WithHost(sshHost), client.WithDialContext(sshDialer(args)))
	}
	api, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("creating docker client: %w", err)
	}
	return &Client{api: api}, nil
}

// Close releases the client's connections.
func (c *Client) Close() error { return c.api.Close() }

// Locality says whether the daemon's process ids are this host's: its API
// is a unix socket here whose server runs in this host's pid namespace,
// and the daemon reports this host's kernel (a socket served here by a
// proxy for a VM's or another machine's engine does not). Decided on the
// first call and kept for the client's life.
func (c *Client) Locality(ctx context.Context) Locality {
	c.localOnce.Do(func() {
		c.local = localityOf(ctx, c.api.DaemonHost())
		if c.local.Local {
			c.local = c.sameKernel(ctx, c.local)
		}
	})
	return c.local
}

// sameKernel keeps l local only when the daemon reports the kernel this
// host runs.
func (c *Client) sameKernel(ctx context.Context, l Locality) Locality {
	if _, err := c.Info(ctx); err != nil {
		return Locality{Reason: fmt.Sprintf("asking the engine for its kernel: %v", err)}
	}
	here, err := kernelRelease()
	if err != nil {
		return Locality{Reason: err.Error()}
	}
	if got := c.kernel; got != here {
		return Locality{Reason: fmt.Sprintf("the engine runs kernel %q, this host %q", got, here)}
	}
	l.Reason += ", on this host's kernel " + here
	return l
}

// Process proves st.Pid is the running container id's process on this
// host ([Prove]); on an engine that is not local it proves nothing.
func (c *Client) Process(ctx context.Context, id string, st ContainerState) (Process, error) {
	if l := c.Locality(ctx); !l.Local {
		return nil, fmt.Errorf("%w (%s)", ErrNotOnThisHost, l.Reason)
	}
	return Prove(id, st.Pid, st.Created)
}

// IsNotFound reports whether err means the object does not exist.
func IsNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

// isConflict reports whether err is the engine's 409: the object is in a
// state that refuses the request.
func isConflict(err error) bool { return cerrdefs.IsConflict(err) }

// Version asks the daemon who it is; it fails when the daemon is unreachable.
func (c *Client) Version(ctx context.Context) (EngineVersion, error) {
	v, err := c.api.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return EngineVersion{}, fmt.Errorf("asking the docker daemon for its version: %w", err)
	}
	ev := EngineVersion{Version: v.Version, APIVersion: v.APIVersion, Arch: v.Arch, OS: v.Os}
	for _, c := range v.Components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			ev.Podman = true
		}
	}
	return ev, nil
}

// InspectImage reports whether ref exists locally, its size, entrypoint
// and command.
func (c *Client) InspectImage(ctx context.Context, ref string) (ImageInfo, bool, error) {
	res, err := c.api.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return ImageInfo{}, false, nil
	}
	if err != nil {
		return ImageInfo{}, false, fmt.Errorf("inspecting image %s: %w", ref, err)
	}
	info := ImageInfo{ID: res.ID, Size: res.Size}
	if res.Config != nil {
		info.Entrypoint, info.Cmd = res.Config.Entrypoint, res.Config.Cmd
		info.Volumes = slices.Sorted(maps.Keys(res.Config.Volumes))
	}
	return info, true, nil
}

// SaveImage streams ref from the engine as an image archive (docker save's
// format); the caller closes it.
func (c *Client) SaveImage(ctx context.Context, ref string) (io.ReadCloser, error) {
	r, err := c.api.ImageSave(ctx, []string{ref})
	if err != nil {
		return nil, fmt.Errorf("exporting image %s: %w", ref, err)
	}
	return r, nil
}

// BuildImage builds img with the classic builder from an in-memory context.
func (c *Client) BuildImage(ctx context.Context, img ImageFiles) error {
	files := append([]File{{Name: "Dockerfile", Mode: 0o644, Data: img.Dockerfile}}, img.Context...)
	tarball, err := Tar(files)
	if err != nil {
		return err
	}
	res, err := c.api.ImageBuild(ctx, bytes.NewReader(tarball), client.ImageBuildOptions{
		Tags: []string{img.Tag}, Dockerfile: "Dockerfile", Remove: true, ForceRemove: true,
		Labels: img.Labels, Version: build.BuilderV1,
	})
	if err != nil {
		return fmt.Errorf("building image %s: %w", img.Tag, err)
	}
	defer res.Body.Close()
	if err := readJSONMessages(res.Body); err != nil {
		return fmt.Errorf("building image %s: %w", img.Tag, err)
	}
	return nil
}

// ImportImage makes img from its files as a root filesystem, applying the
// Dockerfile's USER and ENTRYPOINT as changes; no builder is involved.
func (c *Client) ImportImage(ctx context.Context, img ImageFiles) error {
	tarball, err := Tar(img.RootFS)
	if err != nil {
		return err
	}
	changes := append([]string(nil), img.Changes...)
	for k, v := range img.Labels {
		changes = append(changes, fmt.Sprintf("LABEL %s=%s", k, v))
	}
	res, err := c.api.ImageImport(ctx, client.ImageImportSource{Source: bytes.NewReader(tarball), SourceName: "-"},
		img.Tag, client.ImageImportOptions{Changes: changes})
	if err != nil {
		return fmt.Errorf("importing image %s: %w", img.Tag, err)
	}
	defer res.Close()
	if err := readJSONMessages(res); err != nil {
		return fmt.Errorf("importing image %s: %w", img.Tag, err)
	}
	return nil
}

// readJSONMessages drains a build or import progress stream; the engine
// reports failures inside the stream, not as an HTTP status.
func readJSONMessages(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading engine progress: %w", err)
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return errors.New(strings.TrimSpace(m.ErrorDetail.Message))
		}
		if m.Error != "" {
			return errors.New(strings.TrimSpace(m.Error))
		}
	}
}

// Tar writes files into an uncompressed tar archive, creating their parent
// directories, all owned by root.
func Tar(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		if err := tarParents(tw, f.Name, dirs); err != nil {
			return nil, err
		}
		hdr := &tar.Header{Name: f.Name, Mode: f.Mode, Size: int64(len(f.Data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("writing tar header for %s: %w", f.Name, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, fmt.Errorf("writing %s into tar: %w", f.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing tar: %w", err)
	}
	return buf.Bytes(), nil
}

func tarParents(tw *tar.Writer, name string, seen map[string]bool) error {
	parts := strings.Split(name, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/") + "/"
		if seen[dir] {
			continue
		}
		seen[dir] = true
		hdr := &tar.Header{Name: dir, Mode: 0o755, Typeflag: tar.TypeDir, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("writing tar directory %s: %w", dir, err)
		}
	}
	return nil
}

// Logs copies the container's whole stdout and stderr into the writers.
func (c *Client) Logs(ctx context.Context, id string, stdout, stderr io.Writer) error {
	res, err := c.api.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return fmt.Errorf("reading logs of %s: %w", id, err)
	}
	defer res.Close()
	if _, err := stdcopy.StdCopy(stdout, stderr, res); err != nil {
		return fmt.Errorf("demultiplexing logs of %s: %w", id, err)
	}
	return nil
}

// AttachContainer streams the container's output until it ends.
func (c *Client) AttachContainer(ctx context.Context, id string, stdout, stderr io.Writer) (<-chan error, error) {
	res, err := c.api.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return nil, fmt.Errorf("attaching to %s: %w", id, err)
	}
	done := make(chan error, 1)
	go func() {
		defer res.Close()
		_, err := stdcopy.StdCopy(stdout, stderr, res.Reader)
		done <- err
	}()
	go func() {
		<-ctx.Done()
		res.Close()
	}()
	return done, nil
}

// WaitContainer waits for the next exit of the container.
func (c *Client) WaitContainer(ctx context.Context, id string) <-chan WaitResult {
	w := c.api.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	out := make(chan WaitResult, 1)
	go func() {
		select {
		case r := <-w.Result:
			var err error
			if r.Error != nil && r.Error.Message != "" {
				err = errors.New(r.Error.Message)
			}
			out <- WaitResult{ExitCode: int(r.StatusCode), Err: err}
		case err := <-w.Error:
			out <- WaitResult{ExitCode: -1, Err: fmt.Errorf("waiting for %s: %w", id, err)}
		}
	}()
	return out
}
