package enginehost

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// issued is a certificate and its key.
type issued struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// writeCerts makes a CA, a server certificate for ip and a client
// certificate, under dir: server/{ca,cert,key}.pem for the daemon, then
// server/ready (its entry point waits for it), and client/{ca,cert,key}.pem,
// Docker's DOCKER_CERT_PATH layout.
func writeCerts(dir, ip string) error {
	addr := net.ParseIP(ip)
	if addr == nil {
		return fmt.Errorf("making certificates: %q is not an IP address", ip)
	}
	ca, err := issue(nil, &x509.Certificate{
		Subject: pkix.Name{CommonName: "mcpsidecar enginehost CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	if err != nil {
		return err
	}
	server, err := issue(ca, &x509.Certificate{
		Subject: pkix.Name{CommonName: ip}, IPAddresses: []net.IP{addr},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return err
	}
	client, err := issue(ca, &x509.Certificate{
		Subject:  pkix.Name{CommonName: "mcpsidecar enginehost client"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return err
	}
	if err := writePair(filepath.Join(dir, "server"), ca, server); err != nil {
		return err
	}
	if err := writePair(filepath.Join(dir, "client"), ca, client); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "server", "ready"), nil, 0o644)
}

// issue makes a certificate from tmpl, valid for a day, signed by parent
// (self-signed when parent is nil).
func issue(parent *issued, tmpl *x509.Certificate) (*issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("making a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("making a serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour) // the engine's clock is this host's, but be lenient
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate of %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("reading back the certificate of %s: %w", tmpl.Subject.CommonName, err)
	}
	return &issued{cert: cert, key: key}, nil
}

// writePair writes ca.pem, cert.pem and key.pem (mode 0600) into dir.
func writePair(dir string, ca, leaf *issued) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leaf.key)
	if err != nil {
		return fmt.Errorf("encoding a key: %w", err)
	}
	for _, f := range []struct {
		name, kind string
		der        []byte
		mode       os.FileMode
	}{
		{"ca.pem", "CERTIFICATE", ca.cert.Raw, 0o644},
		{"cert.pem", "CERTIFICATE", leaf.cert.Raw, 0o644},
		{"key.pem", "PRIVATE KEY", keyDER, 0o600},
	} {
		data := pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der})
		if err := os.WriteFile(filepath.Join(dir, f.name), data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// randHex is n random bytes as hex.
func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
