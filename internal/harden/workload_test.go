//go:build linux

package harden

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"
)

// roleWorkload does in one process what the three roles do: serve and
// call HTTP over TCP, a TLS handshake, a name lookup from /etc/hosts,
// JSON, file writes, renames and removals in a writable directory,
// goroutines and a forced GC. It is what the syscall allow-list is checked
// against.
// httpAddr and tlsAddr are the loopback addresses it listens on.
func roleWorkload(dir, httpAddr, tlsAddr string) error {
	steps := []func() error{
		func() error { return fileWork(dir) },
		func() error { return httpWork(httpAddr) },
		func() error { return tlsWork(tlsAddr) },
		lookupWork, gcWork,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

func fileWork(dir string) error {
	path := filepath.Join(dir, "answer.txt")
	if err := os.WriteFile(path+".tmp", []byte(`{"ok":true}`), 0o600); err != nil {
		return err
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString("\n"); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	f.Close()
	var v map[string]any
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	if _, err := os.ReadDir(dir); err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return err
	}
	return os.Remove(path)
}

func httpWork(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "pong")
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	defer srv.Shutdown(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get("http://" + l.Addr().String() + "/ping")
			if err != nil {
				errs <- err
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func tlsWork(addr string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	l, err := tls.Listen("tcp", addr, &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		return err
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	pool := x509.NewCertPool()
	parsed, _ := x509.ParseCertificate(der)
	pool.AddCert(parsed)
	c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "localhost"})
	if err != nil {
		return err
	}
	_, err = io.ReadAll(c)
	c.Close()
	return err
}

func lookupWork() error {
	_, err := net.DefaultResolver.LookupHost(context.Background(), "localhost")
	return err
}

func gcWork() error {
	var keep [][]byte
	for i := range 64 {
		keep = append(keep, make([]byte, 64<<10+i))
	}
	runtime.GC()
	_ = keep
	time.Sleep(20 * time.Millisecond)
	return nil
}
