//go:build linux

package sidecar

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/mcpfake"
)

// TestCheckURLArgs: every spelling and depth of a URL-typed argument is
// held to the server's own scheme, host and port (redteam2 finding 4).
func TestCheckURLArgs(t *testing.T) {
	const server = "http://docs.test:8080/mcp"
	const own, off = "http://docs.test:8080/page", "http://host.docker.internal:18099/internal-only"
	schema := func(s string) any {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("schema %s: %v", s, err)
		}
		return m
	}
	flat := schema(`{"type":"object","properties":{"url":{"type":"string","format":"uri"},"query":{"type":"string"}}}`)
	closed := schema(`{"type":"object","properties":{"url":{"type":"string","format":"uri"}},"additionalProperties":false}`)
	nested := schema(`{"type":"object","properties":{
		"target":{"type":"object","properties":{"href":{"type":"string","format":"uri-reference"},"label":{"type":"string"}}},
		"pages":{"type":"array","items":{"type":"object","properties":{"source_url":{"type":"string"}}}},
		"links":{"type":"array","items":{"type":"string","format":"url"}},
		"either":{"anyOf":[{"type":"string","format":"uri"},{"type":"integer"}]},
		"both":{"allOf":[{"type":"object","properties":{"a":{"type":"string","format":"iri"}}},{"properties":{"b":{"type":"string"}}}]},
		"ref":{"$ref":"#/$defs/Link"},
		"pair":{"type":"array","prefixItems":[{"type":"string"},{"type":"string","format":"uri"}]},
		"extra":{"type":"object","additionalProperties":{"type":"string","format":"uri"}}},
		"$defs":{"Link":{"type":"object","properties":{"imageUrl":{"type":"string"}}}}}`)
	loose := schema(`{"type":"object","properties":{"query":{"type":"string"}}}`)
	tests := []struct {
		name   string
		schema any
		args   string
		want   string // a part of the refusal; "" when the call passes
	}{
		{"declared, own host", flat, `{"url":"` + own + `"}`, ""},
		{"declared, off host", flat, `{"url":"` + off + `"}`, "refusing argument url="},
		{"spelling URL", flat, `{"URL":"` + off + `"}`, "differs from the declared url only in case"},
		{"spelling Url", flat, `{"Url":"` + off + `"}`, "differs from the declared url only in case"},
		{"spelling uRl", flat, `{"uRl":"` + off + `"}`, "differs from the declared url only in case"},
		{"spelling uRl, own host too", flat, `{"uRl":"` + own + `"}`, "differs from the declared url only in case"},
		{"both spellings", flat, `{"url":"` + own + `","URL":"` + off + `"}`, "differs from the declared url only in case"},
		{"Kelvin sign folds like k", schema(`{"properties":{"link":{"type":"string","format":"uri"}}}`), `{"lin\u212a":"` + off + `"}`, "only in case"},
		{"case variant of a non-URL key", flat, `{"Query":"x"}`, "differs from the declared query only in case"},
		{"declared non-URL string holding a URL", flat, `{"query":"` + off + `"}`, ""},
		{"not a string", flat, `{"url":{"href":"` + own + `"}}`, "must be a URL string"},
		{"relative", flat, `{"url":"/x"}`, "not an absolute URL"},
		{"undeclared, additionalProperties false", closed, `{"url":"` + own + `","note":"hi"}`, "does not declare it (additionalProperties is false)"},
		{"undeclared with a URL", loose, `{"query":"q","callback":"` + off + `"}`, "refusing undeclared argument callback="},
		{"undeclared with own URL", loose, `{"query":"q","callback":"` + own + `"}`, ""},
		{"undeclared, URL deep inside", loose, `{"opts":{"list":[{"x":"` + off + `"}]}}`, "refusing undeclared argument opts.list[0].x="},
		{"undeclared plain text", loose, `{"note":"see the docs: not a URL"}`, ""},
		{"undeclared URL-named, relative", loose, `{"next_url":"/x"}`, "refusing undeclared argument next_url="},
		{"undeclared URL-named, not a string", loose, `{"next_url":5}`, "must be a URL string"},
		{"nested object, own", nested, `{"target":{"href":"` + own + `","label":"x"}}`, ""},
		{"nested object, off", nested, `{"target":{"href":"` + off + `"}}`, "refusing argument target.href="},
		{"nested object, case variant", nested, `{"target":{"HREF":"` + off + `"}}`, "differs from the declared target.href only in case"},
		{"array of objects, off", nested, `{"pages":[{"source_url":"` + own + `"},{"source_url":"` + off + `"}]}`, "refusing argument pages[1].source_url="},
		{"array of objects, case variant", nested, `{"pages":[{"Source_URL":"` + off + `"}]}`, "only in case"},
		{"array of strings, off", nested, `{"links":["` + own + `","` + off + `"]}`, "refusing argument links[1]="},
		{"array of strings, own", nested, `{"links":["` + own + `"]}`, ""},
		{"anyOf URL branch, off", nested, `{"either":"` + off + `"}`, "refusing argument either="},
		{"anyOf other branch", nested, `{"either":5}`, ""},
		{"allOf property, off", nested, `{"both":{"a":"` + off + `","b":"x"}}`, "refusing argument both.a="},
		{"$ref property named imageUrl, off", nested, `{"ref":{"imageUrl":"` + off + `"}}`, "refusing argument ref.imageUrl="},
		{"prefixItems position, off", nested, `{"pair":["x","` + off + `"]}`, "refusing argument pair[1]="},
		{"additionalProperties schema, off", nested, `{"extra":{"anything":"` + off + `"}}`, "refusing argument extra.anything="},
		{"no schema at all, undeclared URL", nil, `{"u":"` + off + `"}`, "refusing undeclared argument u="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args map[string]any
			if err := json.Unmarshal([]byte(tt.args), &args); err != nil {
				t.Fatal(err)
			}
			err := checkURLArgs("fetch", tt.schema, args, server)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && err == nil:
				t.Errorf("passed, want refused with %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Errorf("refused with %q, want %q", err, tt.want)
			case err != nil && !strings.HasPrefix(err.Error(), "fetch: "):
				t.Errorf("refusal %q does not name the tool", err)
			}
		})
	}
}

// TestCheckURLArgsBounded: a $ref cycle in a schema or an argument nested
// past the bound is refused, not walked forever or left unchecked.
func TestCheckURLArgsBounded(t *testing.T) {
	cyclic := map[string]any{"$ref": "#", "properties": map[string]any{"a": map[string]any{"$ref": "#"}}}
	if err := checkURLArgs("t", cyclic, map[string]any{"a": "x"}, "https://s.test/mcp"); err == nil || !strings.Contains(err.Error(), "deeper than") {
		t.Errorf("cyclic schema: %v", err)
	}
	deep := map[string]any{}
	cur := deep
	for range maxArgDepth + 2 {
		next := map[string]any{}
		cur["k"] = next
		cur = next
	}
	if err := checkURLArgs("t", nil, deep, "https://s.test/mcp"); err == nil || !strings.Contains(err.Error(), "deeper than") {
		t.Errorf("deep argument: %v", err)
	}
	if err := checkURLArgs("t", map[string]any{"properties": map[string]any{"a": map[string]any{"$ref": "https://evil.test/s.json"}}},
		map[string]any{"a": "x"}, "https://s.test/mcp"); err == nil || !strings.Contains(err.Error(), "not a local definition") {
		t.Errorf("remote $ref: %v", err)
	}
}

// TestURLArgumentCaseVariantRefused: through the sidecar, the red team's
// "URL" for the declared "page"-style argument (here "Page") is refused
// before anything reaches the server, and the call's audit line says why.
func TestURLArgumentCaseVariantRefused(t *testing.T) {
	docs, url := startMCPFake(t, mcpfake.Options{Name: "docs", Tools: docsTools("S.")})
	ts := startSidecar(t, Config{Servers: []ServerConfig{{Name: "docs", URL: url, Tools: []string{"fetch"}}}})
	cs := connect(t, ts.URL, "")
	const off = "http://host.docker.internal:18099/internal-only"
	for _, key := range []string{"Page", "PAGE", "pAge"} {
		text, isErr := callText(t, cs, "fetch", map[string]any{key: off})
		if !isErr || !strings.Contains(text, "only in case") {
			t.Errorf("fetch {%s: %s} = %q (isError %v), want refused", key, off, text, isErr)
		}
	}
	if n := len(docs.Calls()); n != 0 {
		t.Fatalf("refused calls reached the server: %d", n)
	}
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	recs := readAudit(t, ts.AuditPath)
	n := 0
	for _, r := range recs {
		if r.Kind == KindToolCall && r.Name == "fetch" {
			n++
			if r.OK || !strings.Contains(r.Error, "differs from the declared page only in case") {
				t.Errorf("audit line %+v: want a failed call with the reason", r)
			}
		}
	}
	if n != 3 {
		t.Errorf("%d audit lines for fetch, want 3", n)
	}
}
