package otlpwire

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

// TestJSONRoundTrip: OTLP/JSON in, hex ids kept; protobuf and OTLP/JSON
// decode to the same message.
func TestJSONRoundTrip(t *testing.T) {
	in := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","parentSpanId":"b7ad6b7169203332","name":"a \"spanId\":\"x\"","kind":2}]}]}]}`
	m, err := Decode(Traces, []byte(in), true)
	if err != nil {
		t.Fatal(err)
	}
	out, err := MarshalJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"traceId":"0af7651916cd43dd8448eb211c80319c"`, `"parentSpanId":"b7ad6b7169203332"`, `"name":"a \"spanId\":\"x\""`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("OTLP/JSON %s lacks %s", out, want)
		}
	}
	pb, _ := proto.Marshal(m)
	m2, err := Decode(Traces, pb, false)
	if err != nil || !proto.Equal(m, m2) {
		t.Errorf("protobuf round trip: %v", err)
	}
	if Items(m) != 1 {
		t.Errorf("items %d, want 1", Items(m))
	}
}

func TestSignalOf(t *testing.T) {
	for path, want := range map[string]bool{"/v1/traces": true, "/v1/metrics": true, "/v1/logs": true, "/v1/profiles": false, "/v1/traces/": false, "": false} {
		if _, ok := SignalOf(path); ok != want {
			t.Errorf("SignalOf(%q) = %v, want %v", path, ok, want)
		}
	}
}

// TestDecodeRefuses: what is not OTLP of the signal says what is wrong.
func TestDecodeRefuses(t *testing.T) {
	for _, tt := range []struct {
		sig  Signal
		body string
		json bool
		want string
	}{
		{Traces, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"abcd"}]}]}]}`, true, "span_id of 2 bytes, want 8"},
		{Logs, `{"resourceSpans":[]}`, true, "not OTLP/JSON"},
		{Metrics, "\x0a\x05abc", false, "not an OTLP metrics protobuf payload"},
		{"profiles", `{}`, true, `unknown OTLP signal "profiles"`},
	} {
		if _, err := Decode(tt.sig, []byte(tt.body), tt.json); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Decode(%s, %q): %v, want %q", tt.sig, tt.body, err, tt.want)
		}
	}
}
