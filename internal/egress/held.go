package egress

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// The gateway is the one place that knows the held credential values and
// sees every byte of the plain-HTTP paths both ways, so it searches them
// (issue 27). The threats:
//   - an upstream that reflects the request (an echo endpoint, an error
//     page that quotes the request, a misconfigured proxy in front of a
//     model server) hands the injected key to the workload in its
//     answer: answers on the credential listener are searched, headers and
//     body as it streams, and every value found is scrubbed (replaced, byte
//     for byte, by [scrubByte]) before the workload can read it;
//   - a workload that has learned a value sends it to another host: plain
//     HTTP requests on the proxy port, and on the credential listener
//     requests carrying another credential's value, are searched (request
//     line, headers, body as it streams) and refused before the value goes
//     out.
//
// The search covers the forms a value takes on the way: as is,
// percent-encoded (as a query or a form encodes it, and every byte
// escaped, in upper or lower case hex) and base64 (standard and URL
// alphabets, at each of the three alignments, so the value is found
// inside the base64 of a longer text such as an Authorization header).
// A workload that has learned a value can always encode it past any
// search (encrypt it, spell it backwards); the defence is that it never
// learns it (the answers are scrubbed). CONNECT tunnels are TLS the
// gateway does not open: their bytes are not searched.

// minHeldLen is the shortest value searched for: a shorter one would be
// found by chance in ordinary bytes.
const minHeldLen = 8

// scrubByte replaces each byte of a held value found in an answer.
const scrubByte = '*'

// Decision-line values of [Decision.Credential] for a held value seen.
const (
	// CredentialReflected: an answer on the credential listener carried
	// a held value; it was scrubbed before the client read it.
	CredentialReflected = "reflected"
	// CredentialCarried: a request carried a held value to a host that
	// is not the value's own; it was refused before the value went out.
	CredentialCarried = "carried"
)

// needle is one form of one held value.
type needle struct {
	b      []byte
	source string // the credential's Source (a variable name), never the value
	form   string // "as is", "percent-encoded", "base64"
}

// heldSearch finds the forms of a set of held values.
type heldSearch struct {
	needles []needle
}

// newHeldSearch searches for the values of creds (those of at least
// minHeldLen bytes); nil when there is nothing to search for.
func newHeldSearch(creds []*Credential) *heldSearch {
	h := &heldSearch{}
	seen := map[string]bool{}
	for _, c := range creds {
		if len(c.Value) < minHeldLen {
			continue
		}
		for _, f := range valueForms(c.Value) {
			if f.b == "" || seen[f.b] {
				continue
			}
			seen[f.b] = true
			h.needles = append(h.needles, needle{b: []byte(f.b), source: c.Source, form: f.form})
		}
	}
	if len(h.needles) == 0 {
		return nil
	}
	return h
}

type valueForm struct{ b, form string }

// valueForms are the forms v is searched in.
func valueForms(v string) []valueForm {
	forms := []valueForm{{v, "as is"}, {url.QueryEscape(v), "percent-encoded"}, {url.PathEscape(v), "percent-encoded"}}
	var upper, lower strings.Builder
	for i := 0; i < len(v); i++ {
		fmt.Fprintf(&upper, "%%%02X", v[i])
		fmt.Fprintf(&lower, "%%%02x", v[i])
	}
	forms = append(forms, valueForm{upper.String(), "percent-encoded"}, valueForm{lower.String(), "percent-encoded"})
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for _, b := range base64Cores(enc, v) {
			forms = append(forms, valueForm{b, "base64"})
		}
	}
	return forms
}

// base64Cores are the parts of enc's encoding of v that do not depend on
// what surrounds v: one for each of v's three possible alignments in a
// longer text (the characters that mix v's bits with its neighbours'
// are left out).
func base64Cores(enc *base64.Encoding, v string) []string {
	var out []string
	for k := range 3 {
		b := enc.EncodeToString(append(make([]byte, k), v...))
		start := (k*8 + 5) / 6                      // characters holding any of the k leading bytes' bits
		end := ((k + len(v)) * 8) / 6               // characters wholly inside v's bits
		if end > len(b) || end-start < minHeldLen { // too short to be telling
			continue
		}
		out = append(out, strings.TrimRight(b[start:end], "="))
	}
	return out
}

// find returns the first needle in p and where it starts, or -1. A base64
// form is also found wrapped over lines (MIME wraps base64 at 76
// columns): red team, issue 27.
func (h *heldSearch) find(p []byte) (needle, int) {
	best, at := needle{}, -1
	for _, n := range h.needles {
		if i := bytes.Index(p, n.b); i >= 0 && (at < 0 || i < at) {
			best, at = n, i
		}
	}
	if w := newWrapped(p); w != nil {
		for _, n := range h.needles {
			if i := w.index(n); i >= 0 && (at < 0 || i < at) {
				best, at = n, i
			}
		}
	}
	return best, at
}

// wrapped is p without its line breaks, and where each byte left was in p.
type wrapped struct {
	b   []byte
	pos []int
}

// newWrapped is p's wrapped view, or nil when p has no line break.
func newWrapped(p []byte) *wrapped {
	if !bytes.ContainsAny(p, "\r\n") {
		return nil
	}
	w := &wrapped{b: make([]byte, 0, len(p)), pos: make([]int, 0, len(p))}
	for i, c := range p {
		if c != '\r' && c != '\n' {
			w.b, w.pos = append(w.b, c), append(w.pos, i)
		}
	}
	return w
}

// index is where, in p, a base64 needle starts in the wrapped view; -1
// when it is not there or is not a base64 form.
func (w *wrapped) index(n needle) int {
	if n.form != "base64" {
		return -1
	}
	if i := bytes.Index(w.b, n.b); i >= 0 {
		return w.pos[i]
	}
	return -1
}

// findString is find over a string.
func (h *heldSearch) findString(s string) (needle, bool) {
	for _, n := range h.needles {
		if strings.Contains(s, string(n.b)) {
			return n, true
		}
	}
	return needle{}, false
}

// scrub replaces every needle in p, in place (a base64 form wrapped over
// lines too, its line breaks kept); it returns the first one.
func (h *heldSearch) scrub(p []byte) (needle, bool) {
	var first needle
	found := false
	note := func(n needle) {
		if !found {
			first, found = n, true
		}
	}
	for _, n := range h.needles {
		for i := bytes.Index(p, n.b); i >= 0; i = bytes.Index(p, n.b) {
			for j := i; j < i+len(n.b); j++ {
				p[j] = scrubByte
			}
			note(n)
		}
	}
	if w := newWrapped(p); w != nil {
		for _, n := range h.needles {
			if n.form != "base64" {
				continue
			}
			for i := bytes.Index(w.b, n.b); i >= 0; i = bytes.Index(w.b, n.b) {
				for j := i; j < i+len(n.b); j++ {
					w.b[j], p[w.pos[j]] = scrubByte, scrubByte
				}
				note(n)
			}
		}
	}
	return first, found
}

// holdBack is how many bytes at the end of p could begin a needle: they
// are kept until the next read shows whether they do. For a base64 form
// the line breaks in that end are skipped (a wrapped value).
func (h *heldSearch) holdBack(p []byte) int {
	hold := 0
	for _, n := range h.needles {
		for k := min(len(n.b)-1, len(p)); k > hold; k-- {
			if bytes.HasPrefix(n.b, p[len(p)-k:]) {
				hold = k
				break
			}
		}
	}
	w := newWrapped(p)
	if w == nil {
		return hold
	}
	for _, n := range h.needles {
		if n.form != "base64" {
			continue
		}
		for k := min(len(n.b)-1, len(w.b)); k > 0; k-- {
			if bytes.HasPrefix(n.b, w.b[len(w.b)-k:]) {
				hold = max(hold, len(p)-w.pos[len(w.b)-k])
				break
			}
		}
	}
	return hold
}

// heldSeen is where a held value was seen, for the decision line.
type heldSeen struct {
	where  string // "header X-Echo-Auth", "body", "request line"
	source string
	form   string
}

func (s heldSeen) String() string {
	return fmt.Sprintf("the value of %s (%s) in the %s", s.source, s.form, s.where)
}

// errCarried ends a request body that carries a held value.
var errCarried = errors.New("the request carries a held credential value")

// heldReader searches a stream for held values as it is read. In scrub
// mode (answers) every value found is scrubbed and the stream goes on; in
// the other (requests) the read fails with [errCarried] before the value
// is returned. Bytes that could begin a value are held back until the
// next read decides (at most a value's length), so a value split across
// reads is found and no part of it is passed on first.
type heldReader struct {
	r       io.Reader
	h       *heldSearch
	scrub   bool
	where   string
	seen    func(heldSeen)
	atEnd   func() // when set, called once the stream has ended, before its end is returned
	buf     []byte // read, not yet returned
	ready   int    // buf[:ready] may be returned
	err     error
	stopped bool
}

func (hr *heldReader) Read(p []byte) (int, error) {
	for hr.ready == 0 {
		if hr.stopped || (hr.err != nil && len(hr.buf) == 0) {
			if hr.err == nil {
				hr.err = io.EOF
			}
			if hr.atEnd != nil {
				hr.atEnd()
				hr.atEnd = nil
			}
			return 0, hr.err
		}
		if hr.err != nil { // the stream ended: what was held is final
			hr.release()
			break
		}
		chunk := make([]byte, max(len(p), 4096))
		n, err := hr.r.Read(chunk)
		hr.buf = append(hr.buf, chunk[:n]...)
		hr.err = err
		if hr.inspect() {
			return 0, errCarried
		}
		if hr.err == nil {
			hr.ready = len(hr.buf) - hr.h.holdBack(hr.buf)
		} else {
			hr.release()
		}
	}
	n := copy(p, hr.buf[:hr.ready])
	hr.buf = hr.buf[n:]
	hr.ready -= n
	return n, nil
}

// release makes what is buffered final once the stream has ended. Bytes
// still held back then begin a value without completing it: after an
// error they are dropped (the stream is cut anyway), and at its end a
// tail of heldTailScrub bytes or more is scrubbed, so an answer cut short
// on purpose does not hand over a value's first bytes (red team, issue
// 27).
func (hr *heldReader) release() {
	hold := hr.h.holdBack(hr.buf)
	switch {
	case hr.err != io.EOF:
		hr.buf = hr.buf[:len(hr.buf)-hold]
	case hold >= heldTailScrub && hr.scrub:
		for i := len(hr.buf) - hold; i < len(hr.buf); i++ {
			if hr.buf[i] != '\r' && hr.buf[i] != '\n' {
				hr.buf[i] = scrubByte
			}
		}
		hr.seen(heldSeen{where: hr.where + " (its end, the first bytes of a value)", source: "a held value", form: "a prefix"})
	case hold >= heldTailScrub:
		hr.buf = hr.buf[:len(hr.buf)-hold]
		hr.seen(heldSeen{where: hr.where + " (its end, the first bytes of a value)", source: "a held value", form: "a prefix"})
		hr.stopped, hr.err = true, errCarried
	}
	hr.ready = len(hr.buf)
}

// heldTailScrub is the shortest beginning of a value scrubbed at the end
// of an answer: a shorter one is as likely an ordinary word's end.
const heldTailScrub = 4

// inspect searches what is buffered; true when the stream must stop.
func (hr *heldReader) inspect() bool {
	if hr.scrub {
		if n, ok := hr.h.scrub(hr.buf); ok {
			hr.seen(heldSeen{where: hr.where, source: n.source, form: n.form})
		}
		return false
	}
	if n, at := hr.h.find(hr.buf); at >= 0 {
		hr.seen(heldSeen{where: hr.where, source: n.source, form: n.form})
		hr.stopped, hr.err = true, errCarried
		return true
	}
	return false
}

func (hr *heldReader) Close() error {
	if c, ok := hr.r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// carriedInRequest is where r's request line or headers carry a held
// value, if they do (the body is searched as it streams).
func (h *heldSearch) carriedInRequest(r *http.Request) (heldSeen, bool) {
	// Decoded leniently: one invalid escape must not switch the decoded
	// search off (red team, issue 27).
	line := []string{r.RequestURI, lenientUnescape(r.RequestURI, false), lenientUnescape(r.RequestURI, true)}
	for _, s := range line {
		if n, ok := h.findString(s); ok {
			return heldSeen{where: "request line", source: n.source, form: n.form}, true
		}
	}
	for k, vs := range r.Header {
		if n, ok := h.findName(k); ok {
			return heldSeen{where: "header name", source: n.source, form: n.form}, true
		}
		for _, v := range vs {
			if n, ok := h.findString(v); ok {
				return heldSeen{where: "header " + k, source: n.source, form: n.form}, true
			}
		}
	}
	return heldSeen{}, false
}

// scrubHeader scrubs every held value in hdr's values, and removes a
// header whose name holds one (names are canonicalised, so compared
// without case); it returns where the first was seen.
func (h *heldSearch) scrubHeader(hdr http.Header, what string) (heldSeen, bool) {
	var first heldSeen
	found := false
	for k := range hdr {
		if n, ok := h.findName(k); ok {
			delete(hdr, k)
			if !found {
				first, found = heldSeen{where: what + " name", source: n.source, form: n.form}, true
			}
		}
	}
	for k, vs := range hdr {
		for i, v := range vs {
			b := []byte(v)
			if n, ok := h.scrub(b); ok {
				vs[i] = string(b)
				if !found {
					first, found = heldSeen{where: what + " " + k, source: n.source, form: n.form}, true
				}
			}
		}
	}
	return first, found
}

// findName is find over a header name, without case: names reach the
// gateway canonicalised, which changes the case of a value they hold.
func (h *heldSearch) findName(name string) (needle, bool) {
	lower := strings.ToLower(name)
	for _, n := range h.needles {
		if strings.Contains(lower, strings.ToLower(string(n.b))) {
			return n, true
		}
	}
	return needle{}, false
}

// lenientUnescape decodes every valid %XX escape of s and keeps an invalid
// one as it is (and, for a query, reads '+' as a space), as a lenient
// server would: url.PathUnescape refuses the whole string for one bad
// escape.
func lenientUnescape(s string, query bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		case c == '+' && query:
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
