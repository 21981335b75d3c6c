//go:build linux

package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// BenchmarkNewTunnel is one CONNECT through the in-process gateway to a
// loopback echo server, with a byte echoed back: check, dial, hijack,
// relay, decision line.
func BenchmarkNewTunnel(b *testing.B) {
	echo := echoServer(b)
	h := startGateway(b, testConfig(true, echo), newResolver(map[string]string{"echo.allowed.test": "127.0.0.1"}), true)
	target := fmt.Sprintf("echo.allowed.test:%d", echo)
	req := fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	b.ReportAllocs()
	for b.Loop() {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			b.Fatal(err)
		}
		io.WriteString(c, req+"x")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("connect: %v %v", resp, err)
		}
		if _, err := br.ReadByte(); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// BenchmarkForwardKeepAlive is plain-HTTP forwarding as a keep-alive
// client sees it: 16 clients, each on its own kept-alive connection to the
// in-process gateway, GET a small answer from a loopback upstream (by
// name, through the fake resolver: every request is checked in full). It
// reports the upstream connections opened per 100 requests, which
// connection reuse keeps near 16 per b.N rather than 100:
//
//	go test -run '^$' -bench ForwardKeepAlive -benchtime 20000x -cpuprofile /tmp/cpu.out ./internal/egress/
func BenchmarkForwardKeepAlive(b *testing.B) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 128))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	b.Cleanup(srv.Close)
	port := uint16(srv.Listener.Addr().(*net.TCPAddr).Port)
	h := startGateway(b, testConfig(true, port), newResolver(map[string]string{"pub.allowed.test": "127.0.0.1"}), true)
	client := proxyClient(h, nil)
	tr := client.Transport.(*http.Transport)
	tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = 16, 16
	u := fmt.Sprintf("http://127.0.0.1:%d/", port)
	b.SetParallelism(8) // 16 goroutines on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Get(u)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.ReportMetric(float64(conns.Load())*100/float64(b.N), "upstream-conns/100req")
}
