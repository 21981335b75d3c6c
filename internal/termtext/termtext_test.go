package termtext

import (
	"bytes"
	"testing"
)

func TestClean(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain text\n\twith tab", "plain text\n\twith tab"},
		{"gpt\x1b[2J\x1b]0;OWNED\x07", `gpt\x1b[2J\x1b]0;OWNED\x07`},
		{"fake\r ok", `fake\x0d ok`},
		{"del\x7f c1\u009b", `del\x7f c1\x9b`},
		{"bidi \u202eevil\u2066", `bidi \u202eevil\u2066`},
		{"bad \xff utf8", `bad \xff utf8`},
		{"ünïcode ✓", "ünïcode ✓"},
	} {
		if got := Clean(tt.in); got != tt.want {
			t.Errorf("Clean(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestWriterKeepsOnlyAllowedSequences(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, "\x1b[31m", "\x1b[0m")
	in := "\x1b[31m!! denied\x1b[0m then \x1b[2J\x1b]0;title\x07\r\n"
	n, err := w.Write([]byte(in))
	if err != nil || n != len(in) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	want := "\x1b[31m!! denied\x1b[0m then \\x1b[2J\\x1b]0;title\\x07\\x0d\n"
	if buf.String() != want {
		t.Errorf("got %q, want %q", buf.String(), want)
	}
}

func TestLineEscapesLineBreaks(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"one line", "one line"},
		{"x\n    +0.500s gateway allow", `x\n    +0.500s gateway allow`},
		{"a\tb\rc\u2028d\x1b[2J", `a\tb\x0dc\u2028d\x1b[2J`},
	} {
		got := Line(tt.in)
		if got != tt.want {
			t.Errorf("Line(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if Line(got) != got {
			t.Errorf("Line is not idempotent on %q", got)
		}
	}
}
