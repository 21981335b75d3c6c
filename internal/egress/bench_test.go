package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
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
