//go:build docker

package e2e

// runs tail and the OpenTelemetry export during a run (issue 33), on real
// offline agent runs: a `runs tail -f --json` started as the run's
// directory appears prints each decision while the run goes (the delay
// from a decision to its line is measured) and ends with the run; a run's
// live export reaches a real Jaeger as the same trace the post-run export
// writes, each span once.

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// tailLine is a `runs tail --json` line as the test reads it, with when
// it arrived.
type tailLine struct {
	Type  string `json:"type"`
	Event *struct {
		Kind       string    `json:"kind"`
		Time       time.Time `json:"time"`
		DurationMS float64   `json:"duration_ms"`
		Host       string    `json:"host"`
		File       string    `json:"file"`
		Line       int       `json:"line"`
	} `json:"event"`
	End *struct {
		ExitCode int `json:"exit_code"`
	} `json:"end"`
	arrived time.Time
}

// tailWhenItStarts waits for a run directory under dir's runs-* and runs
// `runs tail -f --json` on it; the returned function waits for the tail
// to end and gives its lines.
func tailWhenItStarts(t *testing.T, bin, dir string) func() ([]tailLine, string) {
	t.Helper()
	type result struct {
		lines  []tailLine
		stderr string
	}
	done := make(chan result, 1)
	go func() {
		var path string
		for deadline := time.Now().Add(2 * time.Minute); path == ""; time.Sleep(20 * time.Millisecond) {
			if m, _ := filepath.Glob(filepath.Join(dir, "runs-*", "run-*")); len(m) > 0 {
				path = m[0]
			}
			if time.Now().After(deadline) {
				done <- result{stderr: "no run directory appeared"}
				return
			}
		}
		cmd := exec.Command(bin, "runs", "tail", "-f", "--json", "--interval", "50ms", path)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			done <- result{stderr: err.Error()}
			return
		}
		var lines []tailLine
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			l := tailLine{arrived: time.Now()}
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				l.Type = "unparsable: " + sc.Text()
			}
			lines = append(lines, l)
		}
		if err := cmd.Wait(); err != nil {
			stderr.WriteString("runs tail: " + err.Error())
		}
		done <- result{lines, stderr.String()}
	}()
	return func() ([]tailLine, string) {
		select {
		case r := <-done:
			return r.lines, r.stderr
		case <-time.After(time.Minute):
			t.Fatal("runs tail -f did not end within a minute of the run's end")
			return nil, ""
		}
	}
}

// TestTailFollowsARun: runs tail -f --json beside a real run.
func TestTailFollowsARun(t *testing.T) {
	NeedDocker(t)
	s := agPrepare(t)
	wait := tailWhenItStarts(t, s.bin, s.dir)
	r := s.run(t, "task")
	if r.err != nil {
		t.Fatalf("mcpsidecar run: %v\nstderr:\n%s", r.err, r.stderr)
	}
	lines, stderr := wait()
	checkTail(t, agOnlyRunDir(t, r.runsDir), lines, stderr)
}

// TestLiveExportSameTrace: a run exporting to Jaeger while it goes.
func TestLiveExportSameTrace(t *testing.T) {
	NeedDocker(t)
	j := startJaeger(t)
	s := agPrepare(t)
	r := s.runWith(t, "task", "--otlp-endpoint", "http://"+j.otlpHTTP)
	if r.err != nil {
		t.Fatalf("mcpsidecar run: %v\nstderr:\n%s", r.err, r.stderr)
	}
	checkLiveTrace(t, j, s.bin, agOnlyRunDir(t, r.runsDir), r.stderr)
}

// checkTail: every decision of the record came out of the tail, while
// the run went, and the tail ended with the run's exit.
func checkTail(t *testing.T, runDir string, lines []tailLine, stderr string) {
	t.Helper()
	if len(lines) == 0 {
		t.Fatalf("runs tail printed nothing; stderr: %s", stderr)
	}
	if last := lines[len(lines)-1]; last.Type != "end" || last.End == nil || last.End.ExitCode != 0 {
		t.Errorf("the tail's last line is %+v, want the end with exit code 0 (stderr %s)", last, stderr)
	}
	record, err := os.ReadFile(filepath.Join(runDir, "egress-decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Count(string(record), "\n")
	end := fileTime(t, filepath.Join(runDir, "timeline.jsonl"))
	var delays []time.Duration
	learn := false
	for _, l := range lines {
		if strings.HasPrefix(l.Type, "unparsable") {
			t.Errorf("tail line %s", l.Type)
		}
		if l.Event == nil || l.Event.Kind != "egress" {
			continue
		}
		written := l.Event.Time.Add(time.Duration(l.Event.DurationMS * float64(time.Millisecond)))
		delays = append(delays, l.arrived.Sub(written))
		if l.Event.Host == agLearnHost && l.arrived.Before(end) {
			learn = true
		}
	}
	if len(delays) != want {
		t.Errorf("the tail printed %d decisions, the record has %d", len(delays), want)
	}
	if !learn {
		t.Errorf("the Learn request's decision was not printed before the run ended (%s)", end)
	}
	if len(delays) == 0 {
		return
	}
	slices.Sort(delays)
	med, worst := delays[len(delays)/2], delays[len(delays)-1]
	if worst > 5*time.Second {
		t.Errorf("a decision took %s to reach the tail", worst)
	}
	t.Logf("FIGURE tail delay over %d decisions (from the decision's line being due, its time plus its duration, to the tail's line): median %s, max %s",
		len(delays), med.Round(time.Millisecond), worst.Round(time.Millisecond))
}

func fileTime(t *testing.T, path string) time.Time {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime()
}

// checkLiveTrace: the run sent spans during the run; the trace in Jaeger
// holds each span once, with the ids and parents of the post-run export
// of the same run (runs export --otlp-file).
func checkLiveTrace(t *testing.T, j jaeger, bin, runDir, stderr string) {
	t.Helper()
	m := exportedTrace.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("the run did not say it exported:\n%s", stderr)
	}
	if m[3] == "0" {
		t.Errorf("no span was sent during the run: %s", m[0])
	}
	file := filepath.Join(t.TempDir(), "trace.json")
	if out, err := exec.Command(bin, "runs", "export", "--otlp-file", file, runDir).CombinedOutput(); err != nil {
		t.Fatalf("runs export: %v\n%s", err, out)
	}
	want := otlpFileSpans(t, file)
	var spans []jaegerSpan
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		spans, _ = j.trace(t, m[1])
		if len(spans) >= len(want) || time.Now().After(deadline) {
			break
		}
	}
	got := map[string]string{}
	for _, sp := range spans {
		if _, dup := got[sp.SpanID]; dup {
			t.Errorf("span %s (%s) twice in jaeger", sp.SpanID, sp.OperationName)
		}
		got[sp.SpanID] = ""
		for _, ref := range sp.References {
			if ref.RefType == "CHILD_OF" {
				got[sp.SpanID] = ref.SpanID
			}
		}
	}
	for id, parent := range want {
		p, ok := got[id]
		switch {
		case !ok:
			t.Errorf("span %s of the post-run export is not in jaeger", id)
		case p != parent:
			t.Errorf("span %s: parent %q in jaeger, %q in the post-run export", id, p, parent)
		}
	}
	if len(got) != len(want) {
		t.Errorf("jaeger holds %d spans, the post-run export %d", len(got), len(want))
	}
	t.Logf("trace %s: %d spans, %s sent during the run; jaeger and the post-run export agree", m[1], len(got), m[3])
}

// otlpFileSpans reads an OTLP JSON file: each span's id and its parent's
// (lower-case hex, as Jaeger shows them).
func otlpFileSpans(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var td struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []struct {
						SpanID       string `json:"spanId"`
						ParentSpanID string `json:"parentSpanId"`
					} `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if err := json.Unmarshal([]byte(line), &td); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, rs := range td.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					out[strings.ToLower(sp.SpanID)] = strings.ToLower(sp.ParentSpanID)
				}
			}
		}
	}
	return out
}
