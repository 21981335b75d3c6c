// Package otlpwire reads and writes the OpenTelemetry protocol's HTTP
// payloads for its three signals (traces, metrics, logs): protobuf, and
// OTLP/JSON, whose trace and span ids are hex where protobuf's JSON
// mapping has base64. The egress gateway's relay of an agent's own
// telemetry decodes what the workload sent with it and records it as
// OTLP/JSON; the host reads that record back with it and sends it on.
//
// It is pure: it reads no file, no flag and no environment, and sends
// nothing. Every payload it decodes came from the sandbox and may be
// hostile: a payload that does not decode, or holds an id of the wrong
// length, is an error that says what was wrong.
package otlpwire

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Signal is one of OTLP's signals, named as in its HTTP paths.
type Signal string

// The signals and their OTLP/HTTP paths.
const (
	Traces  Signal = "traces"
	Metrics Signal = "metrics"
	Logs    Signal = "logs"
)

// Path is the signal's OTLP/HTTP path ("/v1/traces").
func (s Signal) Path() string { return "/v1/" + string(s) }

// SignalOf is the signal whose OTLP/HTTP path is path; ok is false for
// any other path.
func SignalOf(path string) (Signal, bool) {
	for _, s := range []Signal{Traces, Metrics, Logs} {
		if s.Path() == path {
			return s, true
		}
	}
	return "", false
}

// Content types of OTLP/HTTP.
const (
	ContentProtobuf = "application/x-protobuf"
	ContentJSON     = "application/json"
)

// NewRequest is an empty Export*ServiceRequest of signal s.
func NewRequest(s Signal) (proto.Message, error) {
	switch s {
	case Traces:
		return &coltrace.ExportTraceServiceRequest{}, nil
	case Metrics:
		return &colmetrics.ExportMetricsServiceRequest{}, nil
	case Logs:
		return &collogs.ExportLogsServiceRequest{}, nil
	}
	return nil, fmt.Errorf("unknown OTLP signal %q", string(s))
}

// NewResponse is the empty Export*ServiceResponse of signal s: what a
// collector answers to a request it took whole.
func NewResponse(s Signal) proto.Message {
	switch s {
	case Metrics:
		return &colmetrics.ExportMetricsServiceResponse{}
	case Logs:
		return &collogs.ExportLogsServiceResponse{}
	}
	return &coltrace.ExportTraceServiceResponse{}
}

// Decode reads one export request of signal s, in protobuf or (json)
// OTLP/JSON. Unknown JSON fields are an error; every id must be empty or
// of its length (16 bytes for a trace id, 8 for a span id).
func Decode(s Signal, body []byte, json bool) (proto.Message, error) {
	m, err := NewRequest(s)
	if err != nil {
		return nil, err
	}
	if json {
		err = UnmarshalJSON(body, m)
	} else if err = proto.Unmarshal(body, m); err != nil {
		err = fmt.Errorf("not an OTLP %s protobuf payload: %w", s, err)
	}
	if err != nil {
		return nil, err
	}
	if err := checkIDs(m.ProtoReflect()); err != nil {
		return nil, fmt.Errorf("OTLP %s payload: %w", s, err)
	}
	return m, nil
}

// Data is what export request m carries, as the signal's data message
// (TracesData, MetricsData or LogsData): the line of an OTLP/JSON file,
// as the OpenTelemetry file exporter writes it. Another message is
// returned as it is.
func Data(m proto.Message) proto.Message {
	switch r := m.(type) {
	case *coltrace.ExportTraceServiceRequest:
		return &tracepb.TracesData{ResourceSpans: r.ResourceSpans}
	case *colmetrics.ExportMetricsServiceRequest:
		return &metricspb.MetricsData{ResourceMetrics: r.ResourceMetrics}
	case *collogs.ExportLogsServiceRequest:
		return &logspb.LogsData{ResourceLogs: r.ResourceLogs}
	}
	return m
}

// Items counts what m holds: spans, metric data points' metrics, or log
// records.
func Items(m proto.Message) int {
	n := 0
	switch r := m.(type) {
	case *coltrace.ExportTraceServiceRequest:
		for _, rs := range r.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				n += len(ss.Spans)
			}
		}
	case *colmetrics.ExportMetricsServiceRequest:
		for _, rm := range r.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				n += len(sm.Metrics)
			}
		}
	case *collogs.ExportLogsServiceRequest:
		for _, rl := range r.ResourceLogs {
			for _, sl := range rl.ScopeLogs {
				n += len(sl.LogRecords)
			}
		}
	}
	return n
}

// idField is an id field of JSON. A string value holds its quotes
// escaped, so `"spanId":"` only ever starts the field itself; protojson
// may put a space after the colon.
var idField = regexp.MustCompile(`"(traceId|spanId|parentSpanId)":\s?"([^"\\]*)"`)

// MarshalJSON is m in OTLP/JSON: protobuf's JSON mapping with hex ids
// and enums as numbers.
func MarshalJSON(m proto.Message) ([]byte, error) {
	b, err := protojson.MarshalOptions{UseEnumNumbers: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding OTLP JSON: %w", err)
	}
	var bad error
	b = replaceIDs(b, func(name, v []byte) []byte {
		raw, err := base64.StdEncoding.DecodeString(string(v))
		if err != nil {
			bad = fmt.Errorf("encoding OTLP JSON: %s %q is not base64: %w", name, v, err)
			return v
		}
		return hex.AppendEncode(nil, raw)
	})
	return b, bad
}

// replaceIDs replaces the value of every id field of JSON b by what
// with makes of it, in one pass.
func replaceIDs(b []byte, with func(name, v []byte) []byte) []byte {
	ms := idField.FindAllSubmatchIndex(b, -1)
	if len(ms) == 0 {
		return b
	}
	out := make([]byte, 0, len(b)+len(b)/4)
	last := 0
	for _, m := range ms {
		out = append(out, b[last:m[4]]...)
		out = append(out, with(b[m[2]:m[3]], b[m[4]:m[5]])...)
		last = m[5]
	}
	return append(out, b[last:]...)
}

// UnmarshalJSON reads OTLP/JSON b into m: its hex ids become the bytes
// they spell.
func UnmarshalJSON(b []byte, m proto.Message) error {
	var bad error
	b = replaceIDs(b, func(name, v []byte) []byte {
		raw, err := hex.DecodeString(string(v))
		if err != nil && bad == nil {
			bad = fmt.Errorf("%s %q is not hex", name, truncate(v, 64))
		}
		return base64.StdEncoding.AppendEncode(nil, raw)
	})
	if bad != nil {
		return fmt.Errorf("not OTLP/JSON: %w", bad)
	}
	if err := protojson.Unmarshal(b, m); err != nil {
		return fmt.Errorf("not OTLP/JSON: %w", err)
	}
	return nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// checkIDs walks m for every trace_id, span_id and parent_span_id and
// checks its length.
func checkIDs(m protoreflect.Message) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Kind() == protoreflect.BytesKind && !fd.IsList():
			err = checkID(string(fd.Name()), v.Bytes())
		case fd.Kind() == protoreflect.MessageKind && fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = checkIDs(l.Get(i).Message())
			}
		case fd.Kind() == protoreflect.MessageKind && !fd.IsMap():
			err = checkIDs(v.Message())
		}
		return err == nil
	})
	return err
}

var errIDLength = errors.New("wrong length")

func checkID(name string, b []byte) error {
	want := 0
	switch name {
	case "trace_id":
		want = 16
	case "span_id", "parent_span_id":
		want = 8
	default:
		return nil
	}
	if len(b) != 0 && len(b) != want {
		return fmt.Errorf("%s of %d bytes, want %d: %w", name, len(b), want, errIDLength)
	}
	return nil
}
