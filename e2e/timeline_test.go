//go:build docker

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

// chromiumFlags keep the browser from reaching anything: every request
// goes to a dead loopback proxy, no name is resolved, and the background
// services that phone home are off (the rule: no traffic leaves this
// machine). The report's own CSP already forbids fetches; these make a
// regression show up as a console error instead of a packet.
var chromiumFlags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--disable-default-apps", "--no-pings", "--disable-domain-reliability", "--disable-breakpad",
	"--disable-client-side-phishing-detection", "--metrics-recording-only", "--mute-audio",
	"--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
	"--host-resolver-rules=MAP * ~NOTFOUND",
	"--enable-logging=stderr", "--v=0",
}

// findChromium returns Debian's chromium; its absence fails the test (the
// report's browser check must never silently not run).
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium not found on PATH: install it (apt-get install -y chromium); .ci/run does")
	return ""
}

// runChromium opens url with extra flags and returns stdout and the
// console messages it logged.
func runChromium(t *testing.T, bin, url string, extra ...string) (string, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append(append(append([]string{}, chromiumFlags...), "--user-data-dir="+t.TempDir()), extra...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", extra, err, stderr.String())
	}
	var console []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, ":CONSOLE") {
			console = append(console, l)
		}
	}
	return stdout.String(), console
}

// TestReportRendersInChromium writes report.html for recorded runs (which
// carry markup in tool arguments and probe text), opens it in a real
// headless browser, and checks that it renders, that its script ran, that
// the console stayed empty (no error, no blocked fetch, no injected
// script), and that a screenshot is produced.
func TestReportRendersInChromium(t *testing.T) {
	bin := findChromium(t)
	for _, run := range []string{"basic", "probe", "crash", "doctor", "testsandbox", "unreachable"} {
		t.Run(run, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "internal", "timeline", "testdata", "runs", run))); err != nil {
				t.Fatal(err)
			}
			if err := timeline.Write(dir); err != nil {
				t.Fatalf("timeline.Write: %v", err)
			}
			if run == "basic" {
				checkTimelineLinksSearch(t, dir, "learn.microsoft.com")
			}
			url := "file://" + filepath.Join(dir, timeline.FileReport)
			dom, console := runChromium(t, bin, url, "--dump-dom")
			if len(console) > 0 {
				t.Errorf("console messages:\n%s", strings.Join(console, "\n"))
			}
			for _, want := range []string{`data-report-ready="1"`, `class="js"`, `id="timeline"`, `id="topology"`, `id="hardening"`, `id="softenings"`} {
				if !strings.Contains(dom, want) {
					t.Errorf("rendered DOM lacks %s", want)
				}
			}
			checkVerdictSentence(t, run, dom)
			if run == "probe" || run == "testsandbox" {
				checkProbeFilter(t, bin, url, run)
			}
			shot := filepath.Join(dir, "report.png")
			_, console = runChromium(t, bin, url, "--screenshot="+shot, "--window-size=1280,2400", "--hide-scrollbars")
			if len(console) > 0 {
				t.Errorf("console messages during screenshot:\n%s", strings.Join(console, "\n"))
			}
			checkScreenshot(t, shot)
			if out := os.Getenv("MCPSIDECAR_REPORT_SCREENSHOT"); out != "" && run == "basic" {
				data, _ := os.ReadFile(shot)
				if err := os.WriteFile(out, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if dir := os.Getenv("MCPSIDECAR_REPORT_SCREENSHOTS"); dir != "" {
				data, _ := os.ReadFile(shot)
				if err := os.WriteFile(filepath.Join(dir, "report-"+run+".png"), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// checkScreenshot decodes the PNG and requires a full-size, non-blank page.
func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decoding screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 2400 {
		t.Errorf("screenshot is %dx%d, want 1280x2400", b.Dx(), b.Dy())
	}
	if n := colours(img); n < 20 {
		t.Errorf("screenshot has %d colours: the page looks blank", n)
	}
}

func colours(img image.Image) int {
	seen := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[r>>8<<16|g>>8<<8|bl>>8] = true
		}
	}
	return len(seen)
}

// checkTimelineLinksSearch reads runDir/timeline.jsonl and requires the
// issue's proof of the join: the sidecar's microsoft_code_sample_search
// call carries a W3C trace-id, and the gateway's allowed upstream request
// to learnHost carries the same id and hangs from that call.
func checkTimelineLinksSearch(t *testing.T, runDir, learnHost string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(runDir, timeline.FileTimeline))
	if err != nil {
		t.Fatalf("reading timeline.jsonl: %v", err)
	}
	var events []timeline.Event
	for i, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var e timeline.Event
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("timeline.jsonl line %d: %v", i+1, err)
		}
		if e.Schema != timeline.Schema {
			t.Fatalf("timeline.jsonl line %d: schema %q, want %q", i+1, e.Schema, timeline.Schema)
		}
		events = append(events, e)
	}
	traceID := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for _, call := range events {
		if call.Kind != timeline.KindToolCall || call.Name != "microsoft_code_sample_search" {
			continue
		}
		if !traceID.MatchString(call.CorrelationID) {
			t.Errorf("search call %d: correlation id %q is not a trace-id", call.Seq, call.CorrelationID)
		}
		for _, e := range events {
			if e.Kind == timeline.KindEgress && e.Parent == call.Seq && e.Decision == "allow" &&
				e.Host == learnHost && e.CorrelationID == call.CorrelationID && e.LinkedBy == timeline.LinkCorrelation {
				return
			}
		}
		t.Errorf("no allowed egress to %s linked to search call %d (correlation id %s)", learnHost, call.Seq, call.CorrelationID)
		return
	}
	t.Errorf("timeline.jsonl has no microsoft_code_sample_search tool call")
}

// verdictSentences are the first things a reviewer reads, per recorded run.
var verdictSentences = map[string]string{
	"basic":       "The agent answered after 2 model requests, 3 tool calls and 1 resource read, and all 2 verdict checks passed; the gateway refused 2 requests the spec does not allow (CONNECT exfil.example:443).",
	"crash":       "The agent container ran out of memory and was killed (exit 137, peak 512.0MiB).",
	"doctor":      "The sandbox works end to end: all 12 checks passed.",
	"testsandbox": "No isolation violation: 47 probes ran from inside the sandbox, 40 passed and 7 could not be tested here (unsupported).",
	"unreachable": "The model endpoint was unreachable: the gateway refused api.example.com:443: host api.example.com is not in allowed_domains.",
	"probe":       "1 isolation violation: P12 Cloud metadata address",
}

// checkVerdictSentence: the rendered page opens with the verdict's reason
// in one sentence.
func checkVerdictSentence(t *testing.T, run, dom string) {
	t.Helper()
	m := regexp.MustCompile(`(?s)id="verdict-sentence"><span class="mark">[^<]*</span>(.*?)</p>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatal("rendered DOM has no verdict sentence")
	}
	got := html.UnescapeString(m[1])
	if want := verdictSentences[run]; !strings.HasPrefix(got, want) {
		t.Errorf("verdict sentence %q, want %q", got, want)
	}
	// Above the fold: the sentence comes before the hardening, the
	// softenings and everything else.
	if i, j := strings.Index(dom, `id="verdict-sentence"`), strings.Index(dom, `id="hardening"`); i < 0 || j < i {
		t.Error("the verdict sentence does not come first")
	}
}

// checkProbeFilter opens the report with each verdict filter picked (by
// the address: report.html#probes=VERDICT) and reads how many probe rows
// the browser shows: the filter is CSS, the count is what the browser
// computed.
func checkProbeFilter(t *testing.T, bin, url, run string) {
	t.Helper()
	want := map[string]map[string]string{
		// Opens on the violations when there are any, else on all.
		"probe":       {"": "showing 1 of 7 probes", "all": "showing 7 of 7 probes"},
		"testsandbox": {"": "showing 47 of 47 probes", "pass": "showing 40 of 47 probes", "violation": "showing 0 of 47 probes"},
	}[run]
	status := regexp.MustCompile(`id="pf-status"[^>]*>([^<]*)<`)
	for filter := range want {
		u := url
		if filter != "" {
			u += "#probes=" + filter
		}
		dom, console := runChromium(t, bin, u, "--dump-dom")
		if len(console) > 0 {
			t.Errorf("filter %q: console messages:\n%s", filter, strings.Join(console, "\n"))
		}
		m := status.FindStringSubmatch(dom)
		if m == nil || m[1] != want[filter] {
			t.Errorf("filter %q: status %v, want %q", filter, m, want[filter])
		}
	}
}
