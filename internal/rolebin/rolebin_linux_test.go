package rolebin

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fixture is a host binary (this test binary: a Linux ELF of
// runtime.GOARCH) in a temporary directory, and a Linux ELF of the other
// machine made from it (its e_machine rewritten).
type fixture struct {
	dir, self, other, otherELF string
	elf                        []byte
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	elf, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{dir: t.TempDir(), elf: elf, other: map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]}
	f.self = filepath.Join(f.dir, "mcpsidecar")
	f.write(t, f.self, elf)
	// e_machine, at offset 18 of the ELF header: EM_X86_64 62, EM_AARCH64 183.
	other := append([]byte(nil), elf...)
	binary.LittleEndian.PutUint16(other[18:], map[string]uint16{"amd64": 62, "arm64": 183}[f.other])
	f.otherELF = filepath.Join(t.TempDir(), "other")
	f.write(t, f.otherELF, other)
	return f
}

func (f fixture) write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

func digest(t *testing.T, path string) string {
	t.Helper()
	d, err := Digest(path)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestChooseRoleBinary(t *testing.T) {
	f := newFixture(t)
	arch := runtime.GOARCH
	besideRole := filepath.Join(f.dir, "mcpsidecar-role")
	inDir := filepath.Join(f.dir, Dir(arch), "mcpsidecar-role")

	// Nothing beside: the host binary itself (go install), when the
	// engine runs it; with the engine's machine unknown, too.
	for _, goarch := range []string{arch, ""} {
		if c, err := Choose(f.self, "linux", goarch, ""); err != nil || !same(c, Choice{Path: f.self, Kind: KindSelf}) {
			t.Errorf("nothing beside, engine %q: %+v (%v), want the host binary", goarch, c, err)
		}
	}

	// In linux-<arch>/ (make dist), stamped: taken.
	f.write(t, inDir, append(append([]byte(nil), f.elf...), "in-dir"...))
	if c, err := Choose(f.self, "linux", arch, "0000 "+digest(t, inDir)); err != nil || !same(c, Choice{Path: inDir, Kind: KindRole}) {
		t.Errorf("stamped role binary in %s: %+v (%v)", Dir(arch), c, err)
	}
	// Beside it (make build), stamped: taken first.
	f.write(t, besideRole, f.elf)
	stamps := digest(t, besideRole) + " " + digest(t, inDir)
	if c, err := Choose(f.self, "linux", arch, stamps); err != nil || !same(c, Choice{Path: besideRole, Kind: KindRole}) {
		t.Errorf("stamped role binary beside: %+v (%v)", c, err)
	}
	// An engine of the other machine: this machine's role binaries are
	// passed over, and the host binary returned (the image check then
	// refuses it, with the reason).
	if c, err := Choose(f.self, "linux", f.other, stamps); err != nil || !same(c, Choice{Path: f.self, Kind: KindSelf}) {
		t.Errorf("engine %s, no binary of its machine: %+v (%v), want the host binary", f.other, c, err)
	}
}

func TestChooseRefuses(t *testing.T) {
	f := newFixture(t)
	arch := runtime.GOARCH
	role := filepath.Join(f.dir, "mcpsidecar-role")
	f.write(t, role, f.elf)
	sum := digest(t, role)
	tests := []struct {
		name, stamped string
		want          []string
	}{
		{"another build's", strings.Repeat("ab", 32), []string{role, f.self, "stale or foreign", sum[:12], "make build"}},
		{"a host binary built without make", "", []string{role, f.self, "built without make", "make build"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Choose(f.self, "linux", arch, tt.stamped)
			if err == nil {
				t.Fatalf("took %+v", c)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
	// A role binary of the wrong machine in linux-<arch>/.
	wrong := filepath.Join(f.dir, Dir(f.other), "mcpsidecar-role")
	f.write(t, wrong, f.elf)
	_, err := Choose(f.self, "linux", f.other, "")
	if err == nil || !strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), "linux/"+f.other) {
		t.Errorf("a %s role binary in %s: %v, want a refusal naming it and linux/%s", arch, Dir(f.other), err, f.other)
	}
}

// TestChooseOtherMachine: for an engine of the other machine, a role
// binary of this one beside the host binary is passed over for the one
// in linux-<engine's arch>/, and the older layout's full binary is taken
// when no role binary is there.
func TestChooseOtherMachine(t *testing.T) {
	f := newFixture(t)
	f.write(t, filepath.Join(f.dir, "mcpsidecar-role"), f.elf)
	other, err := os.ReadFile(f.otherELF)
	if err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(f.dir, Dir(f.other), "mcpsidecar")
	f.write(t, full, other)
	if c, err := Choose(f.self, "linux", f.other, ""); err != nil || !same(c, Choice{Path: full, Kind: KindFull}) {
		t.Errorf("the older layout's full binary: %+v (%v), want %s", c, err, full)
	}
	role := filepath.Join(f.dir, Dir(f.other), "mcpsidecar-role")
	f.write(t, role, other)
	if c, err := Choose(f.self, "linux", f.other, digest(t, role)); err != nil || !same(c, Choice{Path: role, Kind: KindRole}) {
		t.Errorf("the %s role binary: %+v (%v), want %s", f.other, c, err, role)
	}
}

func TestName(t *testing.T) {
	for host, want := range map[string]string{"/a/mcpsidecar": "mcpsidecar-role", "/a/mcpsidecar.exe": "mcpsidecar-role", "bin/mcpsidecar-test": "mcpsidecar-test-role"} {
		if got := Name(host); got != want {
			t.Errorf("Name(%q) = %q, want %q", host, got, want)
		}
	}
}

// same compares what Choose chose: the path and the kind.
func same(a, b Choice) bool { return a.Path == b.Path && a.Kind == b.Kind }

// TestChooseReadsOnce: the role binary's bytes are read once, and the
// Choice carries the bytes whose digest was checked; a file swapped in
// after the check changes nothing the image is built from (red team,
// session 38: the image was read again by path, after the check).
func TestChooseReadsOnce(t *testing.T) {
	f := newFixture(t)
	role := filepath.Join(f.dir, "mcpsidecar-role")
	genuine := append(append([]byte(nil), f.elf...), "genuine"...)
	f.write(t, role, genuine)
	c, err := Choose(f.self, "linux", runtime.GOARCH, Sum(genuine))
	if err != nil || c.Kind != KindRole {
		t.Fatalf("Choose = %+v, %v; want the role binary", c, err)
	}
	f.write(t, role, append(append([]byte(nil), f.elf...), "tampered"...))
	if !bytes.Equal(c.Bytes, genuine) || Sum(c.Bytes) != Sum(genuine) {
		t.Errorf("the Choice's bytes are not the ones checked: %q", c.Bytes[len(f.elf):])
	}
}
