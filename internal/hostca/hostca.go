// Package hostca finds the PEM bundle of CA certificates the sandbox's
// image trusts for TLS to the allowed upstreams: the file the user names
// (MCPSIDECAR_CA_BUNDLE, read by cli), else this host's own trust store.
// On Linux that is Debian's /etc/ssl/certs/ca-certificates.crt, on macOS
// /etc/ssl/cert.pem, and on Windows, which keeps its roots in a
// certificate store and in no file, the system's ROOT store exported as
// PEM (with the roots an administrator or a TLS-inspecting proxy's
// installer added), so that the first run on Windows needs no variable.
//
// It reads only; it reads no environment variable and writes nothing.
package hostca

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"slices"
)

// Bundle is a PEM bundle and where it came from (a path, or the name of
// the store it was exported from).
type Bundle struct {
	PEM    []byte
	Source string
}

// Load reads the PEM bundle at path, or this host's default ([System])
// when path is empty.
func Load(path string) (Bundle, error) {
	if path == "" {
		return System()
	}
	return readFile(path)
}

// readFile reads a PEM bundle from a file. Its content is the user's
// word (the image trusts what it holds), as before this package.
func readFile(path string) (Bundle, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Bundle{}, fmt.Errorf("reading CA certificates: %w", err)
	}
	return Bundle{PEM: b, Source: path}, nil
}

// encode writes the certificates (DER) that parse as X.509 as one PEM
// bundle, sorted and without duplicates, so that the same store gives the
// same bytes (the image's tag is a hash of its content). It returns how
// many it kept.
func encode(ders [][]byte) ([]byte, int) {
	ders = slices.Clone(ders)
	slices.SortFunc(ders, bytes.Compare)
	ders = slices.CompactFunc(ders, bytes.Equal)
	var out bytes.Buffer
	n := 0
	for _, der := range ders {
		if _, err := x509.ParseCertificate(der); err != nil {
			continue // a store may hold what Go cannot parse; the roles could not use it either
		}
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: der}) // a bytes.Buffer does not fail
		n++
	}
	return out.Bytes(), n
}
