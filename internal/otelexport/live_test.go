package otelexport

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

// feed gives live the events of dir's line sources as a tail reads them:
// record by record, line by line.
func feed(t *testing.T, dir string, live *Live) {
	t.Helper()
	for _, file := range timeline.LineFiles() {
		f, err := os.Open(filepath.Join(dir, file))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, timeline.MaxLineBytes+1)
		for n := 1; sc.Scan(); n++ {
			if e, err := timeline.ParseLine(file, []byte(strings.TrimSpace(sc.Text())), n); err == nil {
				live.Add(e)
			}
		}
		f.Close()
	}
}

// TestLiveThenFinishIsTheExport: over each fixture run, the spans sent
// live and those Finish sends afterwards are exactly the post-run
// export's: the same ids, each once, each under the same parent (but the
// ones Finish counts as moved, a correlation id reused by the workload).
func TestLiveThenFinishIsTheExport(t *testing.T) {
	runsDir := filepath.Join("..", "timeline", "testdata", "runs")
	entries, err := os.ReadDir(runsDir)
	if err != nil {
		t.Fatal(err)
	}
	liveTotal := 0
	for _, ent := range entries {
		dir := filepath.Join(runsDir, ent.Name())
		t.Run(ent.Name(), func(t *testing.T) {
			tl, err := timeline.Build(dir)
			if err != nil {
				t.Fatal(err)
			}
			want := keep{tracetest.NewInMemoryExporter()}
			if _, err := Export(context.Background(), tl, want, nil); err != nil {
				t.Fatal(err)
			}
			liveExp, rest := keep{tracetest.NewInMemoryExporter()}, keep{tracetest.NewInMemoryExporter()}
			origins := timeline.ReadOrigins(dir)
			live, err := NewLive(context.Background(), tl.RunID, tl.Started, liveExp, nil, func() timeline.Origins { return origins })
			if err != nil {
				t.Fatal(err)
			}
			feed(t, dir, live)
			st, err := live.Finish(context.Background(), tl, rest, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, s := range append(liveExp.GetSpans(), rest.GetSpans()...) {
				id := s.SpanContext.SpanID().String()
				if _, dup := got[id]; dup {
					t.Errorf("span %s (%s) sent twice", id, s.Name)
				}
				got[id] = s.Parent.SpanID().String()
			}
			moved := 0
			for _, s := range want.GetSpans() {
				id := s.SpanContext.SpanID().String()
				parent, ok := got[id]
				switch {
				case !ok:
					t.Errorf("span %s (%s) never sent", id, s.Name)
				case parent != s.Parent.SpanID().String():
					moved++
				}
			}
			if len(got) != len(want.GetSpans()) || moved != st.Moved || st.Live != len(liveExp.GetSpans()) || st.Spans != len(got) {
				t.Errorf("sent %d spans (%d live), the export has %d; %d under another parent, Finish says %d moved; stats %+v",
					len(got), len(liveExp.GetSpans()), len(want.GetSpans()), moved, st.Moved, st)
			}
			liveTotal += len(liveExp.GetSpans())
			t.Logf("%d spans, %d sent live, %d of those moved", st.Spans, st.Live, st.Moved)
		})
	}
	if liveTotal == 0 {
		t.Error("no span was sent live over any fixture run")
	}
}

// TestLiveBasicSendsCallsAndDecisions: in the basic run, the tool calls
// and the decisions under them go out live, the denied one under the
// fetch that caused it.
func TestLiveBasicSendsCallsAndDecisions(t *testing.T) {
	dir := filepath.Join("..", "timeline", "testdata", "runs", "basic")
	tl := basicRun(t)
	liveExp := keep{tracetest.NewInMemoryExporter()}
	origins := timeline.ReadOrigins(dir)
	live, err := NewLive(context.Background(), tl.RunID, tl.Started, liveExp, nil, func() timeline.Origins { return origins })
	if err != nil {
		t.Fatal(err)
	}
	feed(t, dir, live)
	if _, err := live.Finish(context.Background(), tl, keep{tracetest.NewInMemoryExporter()}, nil); err != nil {
		t.Fatal(err)
	}
	spans := liveExp.GetSpans()
	fetch := find(t, spans, "tools/call microsoft_docs_fetch")
	denied := find(t, spans, "egress deny CONNECT exfil.example")
	if denied.Parent.SpanID() != fetch.SpanContext.SpanID() {
		t.Errorf("the live denial's parent is %s, want the fetch %s", denied.Parent.SpanID(), fetch.SpanContext.SpanID())
	}
}

// TestLiveCollectorHangs: a collector that accepts connections and never
// answers costs Add nothing and Finish no more than its bound; the run's
// spans are not lost from the count (Finish reports the failure).
func TestLiveCollectorHangs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		<-accepted
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	exp, err := NewExporter(context.Background(), Target{Endpoint: "http://" + ln.Addr().String()}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	tl := basicRun(t)
	live, err := NewLive(context.Background(), tl.RunID, tl.Started, exp, nil, func() timeline.Origins { return timeline.Origins{} })
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 20000 { // more than the queue holds
		live.Add(timeline.Event{Kind: timeline.KindToolCall, Source: timeline.SourceSidecar, Time: tl.Started.Add(time.Second),
			OK: true, Name: "t", File: timeline.FileAudit, Line: i + 1})
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("20,000 Adds took %s with the collector hanging", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start = time.Now()
	_, err = live.Finish(ctx, tl, exp, nil)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Finish took %s, bounded by 1 s", d)
	}
	if err == nil {
		t.Error("Finish says the hanging collector took the trace")
	}
}
