//go:build linux

package egress

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkHeldSearchPaired is the cost of searching answers for held
// values on the credential listener (issue 27), paired: two gateways in
// front of one loopback HTTPS upstream, one searching and one with the
// search off, request by request in turn on kept-alive connections. Two
// answers: a 64 KiB JSON body (the throughput cost) and a server-sent
// event stream (the time to the first event, the latency a streamed
// model answer sees):
//
//	go test -run '^$' -bench HeldSearchPaired -benchtime 1000x ./internal/egress/
func BenchmarkHeldSearchPaired(b *testing.B) {
	big := `{"content":"` + strings.Repeat("lorem ipsum dolor sit amet ", 64<<10/27) + `"}`
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.URL.Path, "/stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				fmt.Fprintf(w, "data: {\"delta\":%d}\n\n", i)
				w.(http.Flusher).Flush()
			}
			return
		}
		io.WriteString(w, big)
	}))
	b.Cleanup(srv.Close)
	on := startInjector(b, srv, true, "https")
	off := startInjector(b, srv, true, "https")
	ij := off.g.injectSrv.Handler.(*injector)
	ij.answers, ij.others = nil, nil
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	for _, kind := range []string{"body-64KiB", "stream-first-event"} {
		b.Run(kind, func(b *testing.B) {
			var ons, offs []time.Duration
			for b.Loop() {
				for _, h := range []*injectHarness{on, off} {
					d, err := timeAnswer(client, "http://"+h.credAddr+"/"+h.authority(srv)+"/v1/"+map[string]string{"body-64KiB": "body", "stream-first-event": "stream"}[kind])
					if err != nil {
						b.Fatal(err)
					}
					if h == on {
						ons = append(ons, d)
					} else {
						offs = append(offs, d)
					}
				}
			}
			med := func(ds []time.Duration) float64 {
				slices.Sort(ds)
				return float64(ds[len(ds)/2].Microseconds())
			}
			b.ReportMetric(med(ons), "searched-median-µs")
			b.ReportMetric(med(offs), "unsearched-median-µs")
		})
	}
}

// timeAnswer posts to u and returns the time to the whole answer, or,
// for a stream, to its first event.
func timeAnswer(c *http.Client, u string) (time.Duration, error) {
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(`{"model":"m"}`))
	req.Header.Set("Authorization", "Bearer "+testPlaceholder)
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var d time.Duration
	if strings.HasSuffix(u, "/stream") {
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
			return 0, err
		}
		d = time.Since(start)
		io.Copy(io.Discard, resp.Body)
	} else {
		io.Copy(io.Discard, resp.Body)
		d = time.Since(start)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	return d, nil
}
