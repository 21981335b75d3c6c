package enginehost

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// waitReady polls the engine's /_ping until it answers OK, then reads its
// version; it gives up after timeout, or as soon as the engine's
// container has stopped.
func (e *Engine) waitReady(timeout time.Duration) error {
	client, scheme, err := e.httpClient()
	if err != nil {
		return err
	}
	base := scheme + "://" + strings.TrimPrefix(e.Host, "tcp://")
	e.api, e.apiBase = client, base
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		body, err := get(client, base+"/_ping")
		if err == nil && string(body) == "OK" {
			v, err := get(client, base+"/version")
			if err != nil {
				return err
			}
			e.Version, err = versionOf(v)
			return err
		}
		last = err
		if state, _ := run(nil, "docker", "inspect", "-f", "{{.State.Status}}", e.Container); state != "running" {
			return fmt.Errorf("the engine's container is %s, not running (last /_ping: %v)", state, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the engine at %s did not answer /_ping within %s: %v", e.Host, timeout, last)
}

// httpClient is a client for the engine's API: plain, or with the client
// certificate and the CA that [writeCerts] made.
func (e *Engine) httpClient() (*http.Client, string, error) {
	c := &http.Client{}
	if e.CertDir == "" {
		return c, "http", nil
	}
	dir := filepath.Join(e.CertDir, "client")
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		return nil, "", fmt.Errorf("loading the client certificate: %w", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		return nil, "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, "", errors.New("the CA file holds no certificate")
	}
	c.Transport = &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12,
	}}
	return c, "https", nil
}

func get(c *http.Client, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body, nil
}
