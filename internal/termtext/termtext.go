// Package termtext makes text from a run's records safe to print on a
// terminal. Threat: a workload (or a model, through a tool name it picks)
// writes escape sequences into the records the host prints — its report,
// the audit log, its own output — and clears or rewrites the operator's
// screen, hiding denials or faking "ok" lines. Control characters, DEL, C1
// controls, line and paragraph separators and bidi overrides are shown
// escaped (\x1b, \u202e); newline and tab pass in [Clean] and are escaped
// too by [Line], for a field that must stay on its row.
//
// It must not import anything of the project: it is used on both sides.
package termtext

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Colours are the only escape sequences the project prints itself (SGR
// bold red, green, dim, reset); a Writer given them lets them pass whole.
// A record that carries one of them can at worst colour text.
var Colours = []string{"\x1b[1;31m", "\x1b[32m", "\x1b[2m", "\x1b[0m"}

// Clean returns s with every unsafe character escaped.
func Clean(s string) string {
	if safe(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafe(r) && r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Line returns s escaped for a single-line field: as [Clean], and newline
// and tab escaped too (\n, \t). A record's string printed in a row of a
// table or timeline must not start a line of its own: it would look like
// a row the printer wrote.
func Line(s string) string {
	s = Clean(s)
	if !strings.ContainsAny(s, "\n\t") {
		return s
	}
	return lineEscaper.Replace(s)
}

var lineEscaper = strings.NewReplacer("\n", `\n`, "\t", `\t`)

func safe(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || unsafe(r) {
			return false
		}
	}
	return true
}

func unsafe(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
		return true
	case r == 0x2028 || r == 0x2029 || r == 0x061c || r == 0x200e || r == 0x200f:
		return true
	case (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
		return true
	}
	return false
}

// Writer cleans everything written through it, except the exact escape
// sequences in allowed (the printer's own colours), which pass whole.
type Writer struct {
	w       io.Writer
	allowed []string
}

// NewWriter returns a cleaning writer over w.
func NewWriter(w io.Writer, allowed ...string) *Writer {
	return &Writer{w: w, allowed: allowed}
}

// Write cleans p and writes it; it reports len(p) on success so callers
// see a whole write.
func (w *Writer) Write(p []byte) (int, error) {
	s := string(p)
	if safe(s) {
		return w.w.Write(p)
	}
	var b strings.Builder
	for len(s) > 0 {
		i := strings.IndexByte(s, 0x1b)
		if i < 0 {
			b.WriteString(Clean(s))
			break
		}
		b.WriteString(Clean(s[:i]))
		s = s[i:]
		if a := w.allowedPrefix(s); a != "" {
			b.WriteString(a)
			s = s[len(a):]
			continue
		}
		b.WriteString(`\x1b`)
		s = s[1:]
	}
	if _, err := io.WriteString(w.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *Writer) allowedPrefix(s string) string {
	for _, a := range w.allowed {
		if strings.HasPrefix(s, a) {
			return a
		}
	}
	return ""
}
