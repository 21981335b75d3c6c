package enginehost

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteCerts: the files are where Docker's flags and DOCKER_CERT_PATH
// look, keys private, and a TLS handshake with them succeeds for the
// address the server certificate names and fails for another.
func TestWriteCerts(t *testing.T) {
	dir := t.TempDir()
	if err := writeCerts(dir, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	for _, side := range []string{"server", "client"} {
		if st, err := os.Stat(filepath.Join(dir, side, "key.pem")); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s key: %v, %v; want mode 0600", side, st, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "server", "ready")); err != nil {
		t.Errorf("server/ready: %v", err)
	}
	load := func(side string) (tls.Certificate, *x509.CertPool) {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, side, "cert.pem"), filepath.Join(dir, side, "key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		ca, err := os.ReadFile(filepath.Join(dir, side, "ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		return pair, pool
	}
	serverPair, serverCAs := load("server")
	clientPair, clientCAs := load("client")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{serverPair},
		ClientCAs: serverCAs, ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	dial := func(name string) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{Certificates: []tls.Certificate{clientPair},
			RootCAs: clientCAs, ServerName: name})
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial("127.0.0.1"); err != nil {
		t.Errorf("handshake for the certificate's address: %v", err)
	}
	if err := dial("127.0.0.2"); err == nil {
		t.Error("handshake for another address succeeded")
	}
	if err := writeCerts(t.TempDir(), "engine"); err == nil {
		t.Error("writeCerts accepted a name that is not an IP address")
	}
}

func TestVersionOf(t *testing.T) {
	if v, err := versionOf([]byte(`{"Version":"26.1.5+dfsg1","ApiVersion":"1.45"}`)); err != nil || v != "26.1.5+dfsg1" {
		t.Errorf("versionOf = %q, %v", v, err)
	}
	for _, bad := range []string{`{}`, `not json`} {
		if _, err := versionOf([]byte(bad)); err == nil {
			t.Errorf("versionOf(%s) succeeded", bad)
		}
	}
}
