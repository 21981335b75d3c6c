package timeline

import (
	"bytes"
	"strings"
	"testing"
)

// Found by the red team: a model's tool name or a forged record printed
// raw could clear the operator's terminal or fake an "ok" line.
func TestRenderEscapesControlSequences(t *testing.T) {
	tl := &Timeline{RunID: "run-x\x1b]0;title\x07", Events: []Event{
		{Seq: 1, Source: "sidecar", Kind: KindToolCall, Summary: "tool call \x1b[2Jevil\a failed", OK: false},
		{Seq: 2, Source: "agent", Kind: KindModelRequest, Summary: "model gpt\x1b[2J\r\u202e answered", OK: true},
	}, Problems: []Problem{{File: "x\x1b[31m", Message: "torn line \x1b[31m"}}}
	for _, color := range []bool{false, true} {
		var buf bytes.Buffer
		if err := tl.Render(&buf, RenderOptions{Color: color}); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		for _, own := range []string{ansiRed, ansiGreen, ansiDim, ansiReset} {
			out = strings.ReplaceAll(out, own, "")
		}
		for i, r := range out {
			if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || r == 0x202e {
				t.Fatalf("color=%v: control character %U at %d in:\n%s", color, r, i, out)
			}
		}
		if !strings.Contains(out, `\x1b[2Jevil\x07`) {
			t.Errorf("color=%v: the escaped tool name is missing:\n%s", color, out)
		}
	}
}
