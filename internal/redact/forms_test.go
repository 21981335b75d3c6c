package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/mcpsidecar/mcpsidecar/internal/otlpwire"
)

// formSecrets are values whose encodings differ from their bytes: a
// private key (newlines), a password with a quote, a backslash and
// HTML characters, one with non-ASCII and a control character, and a
// plain token.
var formSecrets = []string{
	"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nabcdefghijklmnop\n-----END PRIVATE KEY-----",
	`pw"with\quote&<x>`,
	"clé-secrète\tzürich",
	"rtsecretAAAA1111", // 16 bytes: also a trace id
}

// TestValuesEncodedForms: a secret written by the record's own encoders
// (a JSON string, with and without HTML escapes; an OTLP/JSON attribute
// as a string and as bytes; base64 at every alignment inside longer
// bytes; a URL query) does not survive redaction: what decodes from the
// redacted text no longer holds it (red team, session 39).
func TestValuesEncodedForms(t *testing.T) {
	for _, secret := range formSecrets {
		secrets := []string{secret}
		red := func(b []byte) []byte { return Values(b, secrets, "<redacted>") }
		t.Run(strings.Fields(secret)[0], func(t *testing.T) {
			for _, html := range []bool{true, false} {
				var buf bytes.Buffer
				enc := json.NewEncoder(&buf)
				enc.SetEscapeHTML(html)
				enc.Encode(map[string]string{"k": "before " + secret + " after"})
				var got map[string]string
				if err := json.Unmarshal(red(buf.Bytes()), &got); err != nil || strings.Contains(got["k"], secret) {
					t.Errorf("JSON (HTML escapes %v): %q, %v", html, got["k"], err)
				}
			}
			for _, v := range []*commonpb.AnyValue{
				{Value: &commonpb.AnyValue_StringValue{StringValue: "x " + secret}},
				{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte(secret)}},
				{Value: &commonpb.AnyValue_BytesValue{BytesValue: append([]byte("some prefix bytes "), secret...)}},
			} {
				line, err := protojson.Marshal(&commonpb.KeyValue{Key: "leak", Value: v})
				if err != nil {
					t.Fatal(err)
				}
				var back commonpb.KeyValue
				if protojson.Unmarshal(red(line), &back) == nil &&
					(strings.Contains(back.Value.GetStringValue(), secret) || bytes.Contains(back.Value.GetBytesValue(), []byte(secret))) {
					t.Errorf("OTLP/JSON %s: the secret decodes back from %s", line, red(line))
				}
			}
			for lead := range 6 {
				for _, e := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
					blob := append(append(bytes.Repeat([]byte{0xa5}, lead), secret...), "tail bytes"...)
					text := red([]byte("data=" + e.EncodeToString(blob) + ";"))
					enc, _ := strings.CutPrefix(strings.TrimSuffix(string(text), ";"), "data=")
					if dec, err := e.DecodeString(enc); err == nil && bytes.Contains(dec, []byte(secret)) {
						t.Errorf("base64 at offset %d: the secret decodes back from %s", lead, text)
					}
				}
			}
			// A 16-byte value as an OTLP trace id: written as hex.
			if len(secret) == 16 {
				line, err := otlpwire.MarshalJSON(&tracepb.TracesData{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{
					Spans: []*tracepb.Span{{TraceId: []byte(secret), SpanId: []byte("spanid01"), Name: "leak"}}}}}}})
				if err != nil {
					t.Fatal(err)
				}
				var back tracepb.TracesData
				if err := otlpwire.UnmarshalJSON(red(line), &back); err == nil && len(back.ResourceSpans) > 0 &&
					string(back.ResourceSpans[0].ScopeSpans[0].Spans[0].TraceId) == secret {
					t.Errorf("trace id: the secret decodes back from %s", red(line))
				}
			}
			q := red([]byte("/v1/x?token=" + url.QueryEscape(secret) + "&p=" + url.PathEscape(secret)))
			if vals, err := url.ParseQuery(strings.SplitN(string(q), "?", 2)[1]); err == nil && (strings.Contains(vals.Get("token"), secret) || strings.Contains(vals.Get("p"), secret)) {
				t.Errorf("URL: %s", q)
			}
		})
	}
}

// TestFormsAreLongOnly: no form of a value is shorter than the
// substring minimum, so an encoding never removes a short, common run of
// characters from unrelated text.
func TestFormsAreLongOnly(t *testing.T) {
	for _, s := range append(formSecrets, "12345678", "abcdefghijk") {
		for _, f := range Forms(s) {
			if len(f) < minSubstring {
				t.Errorf("Forms(%q) has %q, shorter than %d", s, f, minSubstring)
			}
		}
	}
	if got := Values([]byte("a text without it"), []string{"abcdefgh"}, "<r>"); string(got) != "a text without it" {
		t.Errorf("unrelated text changed: %q", got)
	}
}

// BenchmarkValues: redacting a 1 MiB artifact of JSON lines of three
// secrets, in every form in one pass (Values), beside one
// bytes.ReplaceAll a form (the first way it was written) and the exact
// bytes only (what Values did before the forms), side by side in one run:
//
//	go test -run '^$' -bench Values -benchtime 200x ./internal/redact/
func BenchmarkValues(b *testing.B) {
	secrets := []string{"sk-live-0123456789abcdef0123", "ghp_abcdefghijklmnopqrstuvwxyz012345", formSecrets[0]}
	var data []byte
	for len(data) < 1<<20 {
		data = append(data, `{"time":"2026-12-07T15:00:00Z","host":"api.example.com","path":"/v1/x?q=REDACTED","decision":"allow","bytes":1234}`+"\n"...)
	}
	b.Run("forms-one-pass", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			Values(data, secrets, "<redacted>")
		}
	})
	b.Run("forms-a-pass-each", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			out := data
			for _, s := range secrets {
				for _, f := range Forms(s) {
					out = bytes.ReplaceAll(out, []byte(f), []byte("<redacted>"))
				}
			}
		}
	})
	b.Run("exact-bytes-only", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			out := data
			for _, s := range secrets {
				out = bytes.ReplaceAll(out, []byte(s), []byte("<redacted>"))
			}
		}
	})
}
