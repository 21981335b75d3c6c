package timeline

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// TestReportIsSelfContainedAndEscaped parses each report and checks that
// nothing in it can fetch or run anything but its one pinned script, even
// though the recorded runs carry markup in tool arguments and probe text.
func TestReportIsSelfContainedAndEscaped(t *testing.T) {
	for _, name := range runDirs {
		t.Run(name, func(t *testing.T) {
			tl, err := Build(filepath.Join("testdata", "runs", name))
			if err != nil {
				t.Fatal(err)
			}
			var page bytes.Buffer
			if err := tl.WriteHTML(&page); err != nil {
				t.Fatal(err)
			}
			checkSelfContained(t, page.Bytes())
		})
	}
}

// fetching lists elements that load something by themselves.
var fetching = map[string]bool{"img": true, "link": true, "iframe": true, "object": true, "embed": true,
	"video": true, "audio": true, "source": true, "frame": true, "base": true, "form": true}

func checkSelfContained(t *testing.T, page []byte) {
	t.Helper()
	z := html.NewTokenizer(bytes.NewReader(page))
	scripts, csp := 0, ""
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		if tok.Data == "script" {
			scripts++
		}
		if fetching[tok.Data] {
			t.Errorf("report has a <%s> element", tok.Data)
		}
		for _, a := range tok.Attr {
			switch {
			case a.Key == "src" || a.Key == "href" || a.Key == "action" || a.Key == "srcset":
				t.Errorf("<%s> has %s=%q", tok.Data, a.Key, a.Val)
			case strings.HasPrefix(a.Key, "on"):
				t.Errorf("<%s> has an event handler %s", tok.Data, a.Key)
			case a.Key == "style" && strings.Contains(a.Val, "url("):
				t.Errorf("<%s> style loads %q", tok.Data, a.Val)
			case a.Key == "http-equiv" && strings.EqualFold(a.Val, "content-security-policy"):
				csp = "seen"
			}
		}
	}
	if scripts != 1 {
		t.Errorf("report has %d <script> elements, want exactly 1 (markup from the run leaked unescaped?)", scripts)
	}
	if csp == "" {
		t.Error("report has no Content-Security-Policy")
	}
	if !strings.Contains(reportCSP, "default-src 'none'") {
		t.Errorf("CSP %q does not default to none", reportCSP)
	}
	if bytes.Contains(page, []byte("url(")) || bytes.Contains(page, []byte("@import")) {
		t.Error("report CSS loads something")
	}
}

func TestReportShowsWhatAReviewerNeeds(t *testing.T) {
	tests := []struct {
		run  string
		want []string
	}{
		{"basic", []string{
			"verdict OK", "microsoft_code_sample_search", "learn.microsoft.com:443", "13.107.213.70",
			"DENY CONNECT exfil.example:443: host not in allowlist", "&lt;script&gt;alert(1)&lt;/script&gt;",
			"internal: no route out", "egress-gateway", "mcp-sidecar", ".microsoft.com", "<details open>",
			"mcp-sidecar-tool-calls.jsonl:3: invalid line skipped", "linked by time",
		}},
		{"crash", []string{"verdict FAILED", "was killed (exit 137", "out of memory", "agent container exited 137"}},
		{"probe", []string{"Probe results", "5 pass · 1 violation · 1 unsupported", "Cloud metadata address",
			"&lt;img src=x onerror=alert(1)&gt;", "IP literal not covered"}},
		{"empty", []string{"no verdict recorded", "run-metadata.json: missing", "No events were recorded."}},
	}
	for _, tt := range tests {
		t.Run(tt.run, func(t *testing.T) {
			tl, err := Build(filepath.Join("testdata", "runs", tt.run))
			if err != nil {
				t.Fatal(err)
			}
			var page bytes.Buffer
			if err := tl.WriteHTML(&page); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(page.String(), w) {
					t.Errorf("report lacks %q", w)
				}
			}
		})
	}
}

// TestReportKeepsEveryDenialWhenCapped fills a run past the page's row
// budget and checks that every denial is still on the page.
func TestReportKeepsEveryDenialWhenCapped(t *testing.T) {
	tl, err := Build(genRun(t, 2600)) // 2600 calls + 260 unlinked denials
	if err != nil {
		t.Fatal(err)
	}
	roots := 0
	for _, e := range tl.Events {
		if e.Parent == 0 {
			roots++ // 2600 calls, 260 denials and the harness's events
		}
	}
	rows, omitted := tl.rows()
	denials := 0
	for _, r := range rows {
		if r.E.Denied() {
			denials++
		}
	}
	if len(rows) != maxReportRows || omitted != roots-maxReportRows || denials != 260 {
		t.Errorf("rows %d omitted %d denials %d, want %d %d 260", len(rows), omitted, denials, maxReportRows, roots-maxReportRows)
	}
	var page bytes.Buffer
	if err := tl.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), fmt.Sprintf("%d ordinary events are not shown", roots-maxReportRows)) {
		t.Error("page does not say how many events it left out")
	}
}
