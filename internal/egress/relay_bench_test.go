//go:build linux

package egress

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/otlpwire"
)

// benchPost sends body to url b.N times on one kept-alive connection.
func benchPost(b *testing.B, url string, body []byte) {
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		resp, err := c.Post(url, otlpwire.ContentProtobuf, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %s", resp.Status)
		}
	}
}

// BenchmarkRelay is one OTLP/HTTP request of 10 spans through the relay:
// checks, decode, OTLP/JSON, held-value search, decision line, spool.
// BenchmarkRelayBaseline is the same request to a handler that reads the
// body and answers: the difference is the relay's overhead per request.
func BenchmarkRelay(b *testing.B) {
	names := make([]string, 10)
	for i := range names {
		names[i] = "agent step"
	}
	body := tracesProto(b, "a note of some length, as an agent writes into its spans", names...)
	b.Run("relay", func(b *testing.B) {
		h := startRelay(b, Relay{Budget: 1 << 40, Rate: 1e9, Burst: 1 << 30})
		benchPost(b, "http://"+h.relayAddr+"/v1/traces", body)
	})
	b.Run("baseline", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusOK)
		})}
		go srv.Serve(ln)
		defer srv.Close()
		benchPost(b, "http://"+ln.Addr().String()+"/v1/traces", body)
	})
}
