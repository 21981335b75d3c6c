//go:build linux

package roles

import (
	"bufio"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// BenchmarkGatewayPeakMemory100Streams runs the real gateway binary on
// loopback with a credential listener, sends 100 concurrent streaming
// (server-sent events) model requests through it, and reports the
// process's peak resident memory (VmHWM) before and after. Run it with
// -benchtime=1x: one iteration is the whole measurement.
func BenchmarkGatewayPeakMemory100Streams(b *testing.B) {
	const streams, events, eventBytes = 100, 200, 512
	bin := filepath.Join(b.TempDir(), "mcpsidecar")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/mcpsidecar").CombinedOutput(); err != nil {
		b.Fatalf("building: %v\n%s", err, out)
	}
	payload := strings.Repeat("x", eventBytes)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range events {
			fmt.Fprintf(w, "data: %s\n\n", payload)
			w.(http.Flusher).Flush()
			time.Sleep(10 * time.Millisecond)
		}
	}))
	b.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	ca := filepath.Join(b.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)

	cfg := netpolicy.NewConfig([]string{}, []string{"127.0.0.1/32"})
	cfg.HTTPPorts = append(cfg.HTTPPorts, uint16(port))
	cfg.ConnectPorts = append(cfg.ConnectPorts, uint16(port))
	pol, _ := json.Marshal(cfg)
	routes, _ := json.Marshal([]spec.GatewayCredential{{Host: "127.0.0.1", Port: uint16(port), Scheme: "https",
		Header: "Authorization", Format: "Bearer {value}", FromEnv: "BENCH_KEY"}})
	proxyAddr, credAddr := freeAddr(b), freeAddr(b)
	placeholder := "mcpsidecar-placeholder-bench-0123456789"
	cmd := exec.Command(bin, "gateway", "--listen", proxyAddr, "--credential-listen", credAddr, "--decision-log", filepath.Join(b.TempDir(), "d.jsonl"))
	cmd.Env = append(os.Environ(), spec.EnvGatewayPolicy+"="+string(pol), spec.EnvGatewayCredentials+"="+string(routes),
		spec.EnvCredentialPlaceholder+"="+placeholder, "BENCH_KEY=sk-bench", "SSL_CERT_FILE="+ca)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	waitLine(b, stderr, "credential listener")
	idle := vmHWM(b, cmd.Process.Pid)

	for b.Loop() {
		var wg sync.WaitGroup
		errs := make(chan error, streams)
		for range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest(http.MethodPost, "http://"+credAddr+"/127.0.0.1:"+u.Port()+"/v1/chat/completions", strings.NewReader("{}"))
				req.Header.Set("Authorization", "Bearer "+placeholder)
				resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
				if err != nil {
					errs <- err
					return
				}
				defer resp.Body.Close()
				n, _ := io.Copy(io.Discard, resp.Body)
				if want := int64(events * (eventBytes + 8)); resp.StatusCode != 200 || n != want {
					errs <- fmt.Errorf("stream: %d, %d bytes, want %d", resp.StatusCode, n, want)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(idle)/1024, "idle-peak-MiB")
	b.ReportMetric(float64(vmHWM(b, cmd.Process.Pid))/1024, "peak-MiB")
}

func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitLine(b *testing.B, r io.Reader, s string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			go io.Copy(io.Discard, r)
			return
		}
	}
	b.Fatalf("the gateway exited before %q", s)
}

// vmHWM is the process's peak resident set, in KiB.
func vmHWM(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	b.Fatal("no VmHWM")
	return 0
}
