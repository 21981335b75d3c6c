package orchestrate

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// testELF is a minimal x86-64 ELF header; with interp it carries one
// PT_INTERP program header, as a dynamically linked binary does.
func testELF(interp bool, tail string) []byte {
	b := make([]byte, 64)
	copy(b, "\x7fELF\x02\x01\x01")
	le := binary.LittleEndian
	le.PutUint16(b[16:], 2)  // ET_EXEC
	le.PutUint16(b[18:], 62) // EM_X86_64
	le.PutUint32(b[20:], 1)
	le.PutUint16(b[52:], 64) // ehsize
	le.PutUint16(b[54:], 56) // phentsize
	le.PutUint16(b[58:], 64) // shentsize
	if interp {
		le.PutUint64(b[32:], 64) // phoff
		le.PutUint16(b[56:], 1)  // phnum
		ph := make([]byte, 56)
		le.PutUint32(ph, 3) // PT_INTERP
		b = append(b, ph...)
	}
	return append(b, tail...)
}

// TestNewImageContextIsRootFS: the build context is the import path's root
// filesystem under spec.ImageContextDir, file for file, which the
// Dockerfile copies in one layer; so build and import make the same image.
func TestNewImageContextIsRootFS(t *testing.T) {
	img, err := NewImage(ImageSource{Binary: testELF(false, "bin"), CACerts: []byte("ca")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want []dockerx.File
	for _, f := range img.RootFS {
		f.Name = spec.ImageContextDir + "/" + f.Name
		want = append(want, f)
	}
	if diff := cmp.Diff(want, img.Context); diff != "" {
		t.Errorf("context is not the root filesystem under %s/ (-want +got):\n%s", spec.ImageContextDir, diff)
	}
	var names []string
	for _, f := range img.RootFS {
		names = append(names, f.Name)
	}
	wantNames := []string{"mcpsidecar", "etc/ssl/certs/ca-certificates.crt", "etc/passwd", "etc/group"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("root filesystem (-want +got):\n%s", diff)
	}
	if n := strings.Count(string(img.Dockerfile), "COPY "); n != 1 {
		t.Errorf("Dockerfile has %d COPY instructions, want 1:\n%s", n, img.Dockerfile)
	}
	if !strings.Contains(string(img.Dockerfile), "COPY "+spec.ImageContextDir+"/ /\n") {
		t.Errorf("Dockerfile does not copy %s/ to /:\n%s", spec.ImageContextDir, img.Dockerfile)
	}
}

// TestNewImageTag: the tag covers the binary and the CA bundle, and a
// dynamically linked binary is refused.
func TestNewImageTag(t *testing.T) {
	tag := func(src ImageSource) string {
		t.Helper()
		img, err := NewImage(src, map[string]string{"l": "v"})
		if err != nil {
			t.Fatal(err)
		}
		return img.Tag
	}
	base := tag(ImageSource{Binary: testELF(false, "bin-1"), CACerts: []byte("ca-1")})
	tests := []struct {
		name string
		src  ImageSource
	}{
		{"binary changed", ImageSource{Binary: testELF(false, "bin-2"), CACerts: []byte("ca-1")}},
		{"ca bundle changed", ImageSource{Binary: testELF(false, "bin-1"), CACerts: []byte("ca-2")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tag(tt.src); got == base {
				t.Fatalf("tag did not change: %s", got)
			}
		})
	}
	if again := tag(ImageSource{Binary: testELF(false, "bin-1"), CACerts: []byte("ca-1")}); again != base {
		t.Fatalf("tag not deterministic: %s vs %s", again, base)
	}
	_, err := NewImage(ImageSource{Binary: testELF(true, ""), CACerts: []byte("ca")}, nil)
	if err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Fatalf("dynamic binary: got %v", err)
	}
}
