package hostca

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// scratchDir is t.TempDir that also cleans up under wine 8.0, whose
// missing file-disposition call makes Go 1.26's os.RemoveAll (and so
// t.TempDir's cleanup) fail with "Invalid function" while os.Remove works
// (docs/platforms.md): a test-only workaround for wine, not for Windows.
func scratchDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hostca-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				t.Error(err)
			}
		}
		if err := os.Remove(dir); err != nil {
			t.Error(err)
		}
	})
	return dir
}

// selfSigned is the DER of a fresh self-signed CA certificate.
func selfSigned(t *testing.T, name string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// parseAll parses every block of a PEM bundle, failing on anything but a
// certificate Go can parse.
func parseAll(t *testing.T, b []byte) int {
	t.Helper()
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			t.Fatalf("a %s block in the bundle", blk.Type)
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			t.Fatalf("block %d: %v", n, err)
		}
		n++
	}
	if len(bytes.TrimSpace(b)) != 0 {
		t.Fatalf("the bundle ends with %d bytes that are not PEM", len(b))
	}
	return n
}

func TestLoadFile(t *testing.T) {
	path := filepath.Join(scratchDir(t), "ca.pem")
	want := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: selfSigned(t, "a")})
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.PEM, want) || got.Source != path {
		t.Errorf("Load(%s) = %q from %q; want the file's bytes", path, got.PEM, got.Source)
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(scratchDir(t), "missing.pem")
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Load(%s): %v; want an error naming the file", path, err)
	}
}

// TestSystem: with no file named, the host's own store gives a bundle of
// certificates that all parse, the same bytes twice (the image's tag
// hashes them). On Windows it is the ROOT store (under wine, which fills
// that store from the Linux host's certificates: make wine-unit), never a
// Unix path.
func TestSystem(t *testing.T) {
	a, err := Load("")
	if err != nil {
		t.Fatalf("%v (%s)", err, Hint)
	}
	if n := parseAll(t, a.PEM); n < 1 {
		t.Fatalf("%s: no certificate", a.Source)
	}
	b, err := System()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.PEM, b.PEM) {
		t.Errorf("two reads of %s differ", a.Source)
	}
	if runtime.GOOS == "windows" && !strings.Contains(a.Source, "Windows ROOT certificate store") {
		t.Errorf("on Windows the bundle came from %q, want the ROOT store", a.Source)
	}
}

func TestEncodeSortsAndDedupes(t *testing.T) {
	x, y := selfSigned(t, "x"), selfSigned(t, "y")
	got, n := encode([][]byte{y, x, y, []byte("junk")})
	if n != 2 || parseAll(t, got) != 2 {
		t.Fatalf("kept %d certificates, want 2 (a duplicate and junk dropped)", n)
	}
	again, _ := encode([][]byte{x, y})
	if !bytes.Equal(got, again) {
		t.Error("the order of the input changed the bundle")
	}
}
