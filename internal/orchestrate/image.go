package orchestrate

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// ImageUID and ImageGID are spec.User: the owner of the output directories.
const (
	ImageUID = 65532
	ImageGID = 65532
)

// ImageSource is what the FROM-scratch image is made of besides the
// Dockerfile, passwd and group that the spec compiler defines.
type ImageSource struct {
	Binary  []byte // the static mcpsidecar binary
	CACerts []byte // PEM bundle for TLS to allowed upstreams
}

// CheckStatic refuses a binary that needs a dynamic loader: the image has
// none, so such a binary could not start in the container.
func CheckStatic(bin []byte) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("reading the mcpsidecar binary as ELF: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("the mcpsidecar binary is dynamically linked; rebuild it static with CGO_ENABLED=0 (make build)")
		}
	}
	return nil
}

// NewImage assembles the image's files and its content-hash tag
// (spec.ImageTag over every file: a changed binary or CA bundle never
// reuses a stale image). The build context is the root filesystem under
// spec.ImageContextDir, which the Dockerfile copies in one layer; the
// import path takes the same files at their final paths, so both make the
// same image.
func NewImage(src ImageSource, labels map[string]string) (dockerx.ImageFiles, error) {
	if err := CheckStatic(src.Binary); err != nil {
		return dockerx.ImageFiles{}, err
	}
	rootfs := []dockerx.File{
		{Name: "mcpsidecar", Mode: 0o755, Data: src.Binary},
		{Name: "etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Data: src.CACerts},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte(spec.Passwd)},
		{Name: "etc/group", Mode: 0o644, Data: []byte(spec.Group)},
	}
	hashed := make([]spec.ImageFile, 0, len(rootfs))
	context := make([]dockerx.File, 0, len(rootfs))
	for _, f := range rootfs {
		hashed = append(hashed, spec.ImageFile{Path: f.Name, Mode: f.Mode, Data: f.Data})
		context = append(context, dockerx.File{Name: spec.ImageContextDir + "/" + f.Name, Mode: f.Mode, Data: f.Data})
	}
	return dockerx.ImageFiles{
		Tag: spec.ImageTag([]byte(spec.Dockerfile), hashed), Dockerfile: []byte(spec.Dockerfile), Labels: labels,
		Context: context, RootFS: rootfs,
		// The Dockerfile's USER and ENTRYPOINT, for the import path.
		Changes: []string{"USER " + spec.User, `ENTRYPOINT ["/mcpsidecar"]`},
	}, nil
}

// Image methods, as recorded in run-metadata.json.
const (
	MethodReused = "reused"
	MethodBuild  = "build"
	MethodImport = "import"
)

// EnsureImage reuses img when the engine has its tag; otherwise it builds
// it with the classic builder and, if the engine refuses that, imports the
// same files as a root filesystem. forceImport skips the builder.
func EnsureImage(ctx context.Context, e dockerx.Engine, img dockerx.ImageFiles, forceImport bool) (string, dockerx.ImageInfo, error) {
	if info, ok, err := e.InspectImage(ctx, img.Tag); err != nil {
		return "", info, err
	} else if ok {
		return MethodReused, info, nil
	}
	method := MethodBuild
	var buildErr error
	if !forceImport {
		buildErr = e.BuildImage(ctx, img)
	}
	if forceImport || buildErr != nil {
		method = MethodImport
		if err := e.ImportImage(ctx, img); err != nil {
			if buildErr != nil {
				return "", dockerx.ImageInfo{}, fmt.Errorf("%w; falling back to import: %w", buildErr, err)
			}
			return "", dockerx.ImageInfo{}, err
		}
	}
	info, ok, err := e.InspectImage(ctx, img.Tag)
	if err != nil {
		return "", info, err
	}
	if !ok {
		return "", info, fmt.Errorf("image %s missing after %s", img.Tag, method)
	}
	return method, info, nil
}
