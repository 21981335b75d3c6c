package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
)

// secretNameParts mark a host variable whose value is a secret by its
// name. A match errs towards secret: redacting a harmless value costs a
// less readable artifact, missing a key leaks it.
var secretNameParts = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE",
	"CREDENTIAL", "AUTH", "PRIVATE", "COOKIE", "SESSION", "SIGNATURE"}

// SecretName reports whether a variable's name says it holds a secret
// (OPENAI_API_KEY, GITHUB_TOKEN, DB_PASSWORD, ...).
func SecretName(name string) bool {
	up := strings.ToUpper(name)
	for _, p := range secretNameParts {
		if strings.Contains(up, p) {
			return true
		}
	}
	return false
}

// URLPassword is the password of a URL with credentials in it
// (https://user:pw@host), or "".
func URLPassword(v string) string {
	u, err := url.Parse(v)
	if err != nil || u.User == nil {
		return ""
	}
	pw, _ := u.User.Password()
	return pw
}

// minSubstring is the shortest value removed wherever it occurs. A
// shorter one is removed only as a whole token: replacing every "gpt" or
// "1" inside other words made artifacts unreadable, not safer.
const minSubstring = 8

// Values removes every secret value from data and writes marker in its
// place: a long one wherever it occurs, a short one only where it stands
// alone as a token (neither neighbour a letter or a digit).
//
// A long value is also removed in each form the record's own encoders
// give it ([Forms]): escaped in a JSON string, base64 (the bytes of an
// OTLP/JSON attribute), percent-encoded (red team, session 39: a private
// key's newlines, a password's quote and a span's bytes attribute each
// kept the value in the record, and the relay decoded it back for the
// collector).
func Values(data []byte, secrets []string, marker string) []byte {
	var long []string
	for _, s := range secrets {
		if len(s) >= minSubstring {
			long = append(long, Forms(s)...)
		}
	}
	if len(long) > 0 {
		// One pass over data for every form of every value (as fast as
		// one bytes.ReplaceAll; BenchmarkValues), the longest first
		// where two match at one place.
		slices.SortStableFunc(long, func(a, b string) int { return len(b) - len(a) })
		args := make([]string, 0, 2*len(long))
		for _, f := range long {
			args = append(args, f, marker)
		}
		if r := strings.NewReplacer(args...).Replace(string(data)); len(r) != len(data) || r != string(data) {
			data = []byte(r)
		}
	}
	for _, s := range secrets {
		if s != "" && len(s) < minSubstring {
			data = replaceToken(data, []byte(s), marker)
		}
	}
	return data
}

// Forms are the ways a secret value s appears in what the harness writes
// and sends: s itself; inside a JSON string, as encoding/json and
// protojson escape it (with and without the HTML escapes); percent-encoded
// as in a URL's query or path; hex (lower and upper case); and base64 (standard and URL alphabets):
// the whole value encoded alone, and, for the value inside longer encoded
// bytes, the part of its encoding that its own bytes alone decide at each
// of the three alignments. Longest first, each once, none shorter than
// minSubstring (a shorter one would remove unrelated text).
func Forms(s string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(f string) {
		if len(f) >= minSubstring && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	add(s)
	if b, err := json.Marshal(s); err == nil {
		add(string(b[1 : len(b)-1]))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(s) == nil {
		b := bytes.TrimSpace(buf.Bytes())
		add(string(b[1 : len(b)-1]))
	}
	add(url.QueryEscape(s))
	add(url.PathEscape(s))
	// Hex, as OTLP/JSON writes trace and span ids (red team, session 39:
	// a 16-byte secret as a span's trace id was in the record as hex and
	// reached the collector as its bytes).
	add(hex.EncodeToString([]byte(s)))
	add(strings.ToUpper(hex.EncodeToString([]byte(s))))
	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		add(e.EncodeToString([]byte(s)))
		raw := e.WithPadding(base64.NoPadding)
		for lead := range 3 {
			b := append(make([]byte, lead), s...)
			enc := raw.EncodeToString(b)
			// Characters of whole 3-byte groups only (a partial group's
			// depend on the bytes after), from the first that no
			// leading byte feeds: 0, 2 or 3.
			whole := 4 * (len(b) / 3)
			skip := [3]int{0, 2, 3}[lead]
			if whole > skip {
				add(enc[skip:whole])
			}
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// replaceToken replaces s where neither neighbour is a letter or a digit.
func replaceToken(data, s []byte, marker string) []byte {
	var out []byte
	rest := data
	for {
		i := bytes.Index(rest, s)
		if i < 0 {
			break
		}
		end := i + len(s)
		if (i > 0 && isAlnum(rest[i-1])) || (end < len(rest) && isAlnum(rest[end])) {
			out = append(out, rest[:i+1]...)
			rest = rest[i+1:]
			continue
		}
		out = append(append(out, rest[:i]...), marker...)
		rest = rest[end:]
	}
	if out == nil {
		return data
	}
	return append(out, rest...)
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
