// Package rolebin chooses the binary that goes into the sandbox's image:
// the slim Linux role binary (cmd/mcpsidecar-role, which runs only the
// in-container roles, internal/roles) of the engine's architecture when
// it is found beside the host binary, else the host binary itself when
// the engine runs it (a `go install`ed binary), else the older release
// layout's full Linux binary. A role binary found is checked twice before
// it is used: its headers (internal/binarch) and that it is one built
// with the host binary: its SHA-256 is among those `make` stamped into the
// host binary (internal/version.RoleBinaries). So a stale role binary left
// beside a rebuilt host binary, or one from another release, never goes
// into a sandbox unnoticed: it is refused, naming both files. (Go's build
// information cannot tell: -trimpath leaves the linker flags out of it,
// and a modified tree has one revision for many builds.)
//
// It reads files and nothing else: no engine, no environment.
package rolebin

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/binarch"
)

// Kinds of the binary chosen, as run-metadata.json records them
// (image.binary_kind).
const (
	KindRole = "role" // the slim role binary
	KindSelf = "self" // the host binary itself
	KindFull = "full" // a full Linux binary in linux-<arch>/ (the layout before the role binary)
)

// Choice is the binary chosen for the image.
type Choice struct {
	Path string
	Kind string
	// Bytes are the role binary's bytes as they were checked (KindRole):
	// the image is built from them, never from a second read of Path,
	// which could name another file by then.
	Bytes []byte
}

// Dir is where, beside the host binary, a release archive keeps the Linux
// binaries for an engine of goarch: linux-amd64/, linux-arm64/ (make dist).
func Dir(goarch string) string { return "linux-" + goarch }

// Name is the role binary's file name beside a host binary named host:
// mcpsidecar-role beside mcpsidecar (and mcpsidecar.exe). The test binary
// (bin/mcpsidecar-test, whose own hidden commands run in containers too)
// finds no mcpsidecar-test-role and goes into the image itself.
func Name(host string) string {
	return strings.TrimSuffix(filepath.Base(host), ".exe") + "-role"
}

// Choose returns the binary for the image of an engine of goos/goarch,
// self being the host binary's path. With goarch empty (the engine's
// machine was not read: another backend) it is self. A role binary that
// is there but cannot be used (a wrong architecture in linux-<goarch>/, a
// build other than self's) is an error.
// stamped are the SHA-256 digests (hex, space-separated) of the role
// binaries built with self (internal/version.RoleBinaries).
func Choose(self, goos, goarch, stamped string) (Choice, error) {
	if goarch == "" {
		return Choice{Path: self, Kind: KindSelf}, nil
	}
	goos = cmp.Or(goos, "linux")
	dir, name := filepath.Dir(self), Name(self)
	// Beside the host binary (make build), a role binary of another
	// machine is not this engine's: look in linux-<goarch>/ then.
	if p := filepath.Join(dir, name); exists(p) && binarch.CheckFile(p, goos, goarch) == nil {
		return checked(self, p, stamped)
	}
	if p := filepath.Join(dir, Dir(goarch), name); exists(p) {
		if err := binarch.CheckFile(p, goos, goarch); err != nil {
			return Choice{}, fmt.Errorf("the role binary %s is not one an engine of %s/%s runs: %w; replace it with the release archive's, or build it: make dist", p, goos, goarch, err)
		}
		return checked(self, p, stamped)
	}
	if binarch.CheckFile(self, goos, goarch) == nil {
		return Choice{Path: self, Kind: KindSelf}, nil
	}
	if p := filepath.Join(dir, Dir(goarch), "mcpsidecar"); binarch.CheckFile(p, goos, goarch) == nil {
		return Choice{Path: p, Kind: KindFull}, nil
	}
	return Choice{Path: self, Kind: KindSelf}, nil // the image check refuses it, with the reason
}

// checked is the role binary at role once its digest is one of stamped.
// It is read once: the digest is of the bytes the Choice carries.
func checked(self, role, stamped string) (Choice, error) {
	b, err := os.ReadFile(role)
	if err != nil {
		return Choice{}, fmt.Errorf("reading the role binary: %w", err)
	}
	sum := Sum(b)
	if stamped == "" {
		return Choice{}, fmt.Errorf("the role binary %s was not built with the host binary %s, which was built without make and knows no role binary: rebuild both together (make build), or remove %s to put the host binary itself into the image",
			role, self, role)
	}
	if !slices.Contains(strings.Fields(stamped), sum) {
		return Choice{}, fmt.Errorf("the role binary %s (SHA-256 %.12s) is not one built with the host binary %s (it knows %s): a stale or foreign role binary; rebuild both together (make build), or use the release archive as it came, or remove %s to put the host binary itself into the image",
			role, sum, self, short(stamped), role)
	}
	return Choice{Path: role, Kind: KindRole, Bytes: b}, nil
}

// Sum is the SHA-256 of b, in hex.
func Sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Digest is the SHA-256 of the file at path, in hex.
func Digest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// short is the digests in stamped, each cut to 12 characters.
func short(stamped string) string {
	var out []string
	for _, d := range strings.Fields(stamped) {
		out = append(out, d[:min(len(d), 12)])
	}
	return strings.Join(out, ", ")
}

// exists reports whether path names something (a broken link included:
// Choose then says what is wrong with it).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}
