package spectrust

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

var shell = []spec.Softening{{Capability: "shell_access", Layer: "no-spawn", What: "agent may execve/execveat (the no-spawn filter is not installed)"}}

func newStore(t *testing.T) Store {
	t.Helper()
	return Store{Dir: filepath.Join(t.TempDir(), "config", "mcpsidecar")}
}

// TestTrustRoundTrip: a trusted content is Trusted; one changed byte is
// Changed and names the softening the trusted version did not have;
// untrusting forgets the file.
func TestTrustRoundTrip(t *testing.T) {
	s := newStore(t)
	path := "/work/repo/sandbox_spec.toml"
	v1 := []byte("schema_version = 1\n")
	if c, err := s.Check(path, v1, nil); err != nil || c.Status != Unknown {
		t.Fatalf("empty store: %+v, %v; want Unknown", c, err)
	}
	if err := s.Trust(Entry{Path: path, SHA256: Hash(v1), Trusted: time.Unix(0, 0).UTC()}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Check(path, v1, nil); err != nil || c.Status != Trusted {
		t.Fatalf("after trust: %+v, %v; want Trusted", c, err)
	}
	if c, _ := s.Check("/elsewhere/sandbox_spec.toml", v1, nil); c.Status != Unknown {
		t.Errorf("same content at another path: %v, want Unknown (trust is for a file)", c.Status)
	}
	v2 := []byte("schema_version = 1\n ")
	c, err := s.Check(path, v2, shell)
	if err != nil || c.Status != Changed || c.Previous.SHA256 != Hash(v1) {
		t.Fatalf("changed byte: %+v, %v; want Changed from %s", c, err, Hash(v1))
	}
	if diff := cmp.Diff(shell, c.Added); diff != "" {
		t.Errorf("added mismatch (-want +got):\n%s", diff)
	}
	if ok, err := s.Untrust(path); !ok || err != nil {
		t.Fatalf("untrust: %v, %v", ok, err)
	}
	if ok, _ := s.Untrust(path); ok {
		t.Error("untrusting twice found an entry")
	}
	if all, err := s.List(); err != nil || len(all) != 0 {
		t.Errorf("after untrust: %v, %v", all, err)
	}
}

// TestTrustReplacesOneEntryPerFile: trusting new content of a file
// replaces its entry; the store holds one content per file.
func TestTrustReplacesOneEntryPerFile(t *testing.T) {
	s := newStore(t)
	for _, h := range []string{"a", "b"} {
		if err := s.Trust(Entry{Path: "/x/sandbox_spec.toml", SHA256: h}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Trust(Entry{Path: "/a/sandbox_spec.toml", SHA256: "c"}); err != nil {
		t.Fatal(err)
	}
	all, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Path != "/a/sandbox_spec.toml" || all[1].SHA256 != "b" {
		t.Errorf("got %+v, want /a (c) and /x (b)", all)
	}
	if err := s.Trust(Entry{Path: "relative.toml", SHA256: "d"}); err == nil {
		t.Error("a relative path was recorded")
	}
}

// TestDecideChangedWithoutNewSoftening: a change that adds no softening
// still needs trust, with nothing listed as added.
func TestDecideChangedWithoutNewSoftening(t *testing.T) {
	c := Decide(Entry{SHA256: "old", Softenings: shell}, true, "new", shell)
	if c.Status != Changed || len(c.Added) != 0 {
		t.Errorf("got %+v, want Changed with nothing added", c)
	}
}

func TestHash(t *testing.T) {
	if got := Hash([]byte("")); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("Hash(\"\") = %s", got)
	}
}
