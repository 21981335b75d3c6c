//go:build linux

package spec

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/moby/profiles/seccomp"

	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

// TestMobyProfileVendored: seccomp_moby.json, which every host embeds,
// is the library's DefaultProfile (only its Linux build has one).
func TestMobyProfileVendored(t *testing.T) {
	b, err := json.MarshalIndent(seccomp.DefaultProfile(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "seccomp_moby.json", append(b, '\n'))
}

// TestSeccompProfileSameAsLibrarys: the profile built from the vendored
// file is byte for byte the one built from the library's own value, as
// before the file existed.
func TestSeccompProfileSameAsLibrarys(t *testing.T) {
	want, err := tighten(seccomp.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	got, err := SeccompProfile()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the profile from seccomp_moby.json differs from the library's (%d vs %d bytes)", len(got), len(want))
	}
}
