package spec

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestImageTag(t *testing.T) {
	tag := func(df, bin string) string {
		t.Helper()
		got, err := ImageTag([]byte(df), strings.NewReader(bin))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	base := tag(Dockerfile, "binary-1")
	if !regexp.MustCompile(`^mcpsidecar:[0-9a-f]{16}$`).MatchString(base) {
		t.Fatalf("tag %q is not mcpsidecar:<16 hex>", base)
	}
	tests := []struct{ name, df, bin string }{
		{"binary changed", Dockerfile, "binary-2"},
		{"dockerfile changed", Dockerfile + "# x\n", "binary-1"},
		{"boundary moved", Dockerfile + "b", "inary-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tag(tt.df, tt.bin); got == base {
				t.Fatalf("tag did not change: %s", got)
			}
		})
	}
	if again := tag(Dockerfile, "binary-1"); again != base {
		t.Fatalf("tag not deterministic: %s vs %s", again, base)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk gone") }

func TestImageTagReadError(t *testing.T) {
	_, err := ImageTag([]byte(Dockerfile), failingReader{})
	if err == nil || !strings.Contains(err.Error(), "hashing binary: disk gone") {
		t.Fatalf("got %v", err)
	}
}
