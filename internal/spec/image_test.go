package spec

import (
	"regexp"
	"testing"
)

func testImageFiles() []ImageFile {
	return []ImageFile{
		{Path: "mcpsidecar", Mode: 0o755, Data: []byte("binary-1")},
		{Path: "etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Data: []byte("ca-1")},
		{Path: "etc/passwd", Mode: 0o644, Data: []byte(Passwd)},
		{Path: "etc/group", Mode: 0o644, Data: []byte(Group)},
	}
}

// TestImageTag changes one input at a time: every one must change the tag.
func TestImageTag(t *testing.T) {
	base := ImageTag([]byte(Dockerfile), testImageFiles())
	if !regexp.MustCompile(`^mcpsidecar:[0-9a-f]{16}$`).MatchString(base) {
		t.Fatalf("tag %q is not mcpsidecar:<16 hex>", base)
	}
	tests := []struct {
		name   string
		df     string
		change func(f []ImageFile) []ImageFile
	}{
		{"binary changed", Dockerfile, func(f []ImageFile) []ImageFile { f[0].Data = []byte("binary-2"); return f }},
		{"ca bundle changed", Dockerfile, func(f []ImageFile) []ImageFile { f[1].Data = []byte("ca-2"); return f }},
		{"passwd changed", Dockerfile, func(f []ImageFile) []ImageFile { f[2].Data = []byte(Passwd + "x:x:1:1::/:/x\n"); return f }},
		{"group changed", Dockerfile, func(f []ImageFile) []ImageFile { f[3].Data = []byte(Group + "x:x:1:\n"); return f }},
		{"mode changed", Dockerfile, func(f []ImageFile) []ImageFile { f[0].Mode = 0o700; return f }},
		{"path changed", Dockerfile, func(f []ImageFile) []ImageFile { f[0].Path = "bin/mcpsidecar"; return f }},
		{"file added", Dockerfile, func(f []ImageFile) []ImageFile { return append(f, ImageFile{Path: "x", Mode: 0o644}) }},
		{"file removed", Dockerfile, func(f []ImageFile) []ImageFile { return f[:3] }},
		{"dockerfile changed", Dockerfile + "# x\n", func(f []ImageFile) []ImageFile { return f }},
		{"boundary moved", Dockerfile, func(f []ImageFile) []ImageFile {
			f[2].Data, f[3].Data = []byte(Passwd+Group[:1]), []byte(Group[1:])
			return f
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ImageTag([]byte(tt.df), tt.change(testImageFiles())); got == base {
				t.Fatalf("tag did not change: %s", got)
			}
		})
	}
	t.Run("deterministic and order-free", func(t *testing.T) {
		f := testImageFiles()
		f[0], f[3] = f[3], f[0]
		if again := ImageTag([]byte(Dockerfile), f); again != base {
			t.Fatalf("tag depends on file order: %s vs %s", again, base)
		}
	})
}
