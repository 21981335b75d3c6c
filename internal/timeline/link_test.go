package timeline

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLinkNeedsTheSidecarsOrigin: a gateway decision hangs from a tool call
// only when it provably came from the sidecar (its scope, or its client
// address); one of the agent's own that carries the call's correlation id
// (the workload chose the traceparent the sidecar adopted) stays the
// agent's, with a warning and a problem (redteam2 finding 3).
func TestLinkNeedsTheSidecarsOrigin(t *testing.T) {
	at := func(ms int) time.Time {
		return time.Date(2026, 12, 2, 7, 52, 14, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
	}
	sidecarKnown := Origins{sidecar: map[netip.Addr]bool{netip.MustParseAddr("10.0.0.2"): true}}
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	call := Event{Time: at(100), Source: SourceSidecar, Kind: KindToolCall, Name: "echo", CorrelationID: id}
	agentCall := Event{Time: at(90), Source: SourceAgent, Kind: KindAgentToolCall, Name: "echo", CorrelationID: id}
	model := Event{Time: at(50), Source: SourceAgent, Kind: KindModelRequest, CorrelationID: id}
	tests := []struct {
		name    string
		origins Origins
		anchors []Event
		scope   string
		client  string
		parent  string // the kind of event the decision hangs from ("" for none)
		warned  bool
	}{
		{"sidecar scope", Origins{}, []Event{call}, "sidecar/fx/echo", "10.0.0.2:5000", KindToolCall, false},
		{"sidecar scope, connect-time list", Origins{}, []Event{call}, "sidecar/fx", "", KindToolCall, false},
		{"agent scope", sidecarKnown, []Event{call}, "agent", "10.0.0.3:5000", "", true},
		{"agent scope, sidecar address unknown", Origins{}, []Event{call}, "agent", "10.0.0.3:5000", "", true},
		{"impersonation claim", Origins{}, []Event{call}, "agent/fx/echo", "10.0.0.3:5000", "", true},
		{"no scope, the sidecar's address", sidecarKnown, []Event{call}, "", "10.0.0.2:5000", KindToolCall, false},
		{"no scope, the sidecar's address mapped", sidecarKnown, []Event{call}, "", "[::ffff:10.0.0.2]:5000", KindToolCall, false},
		{"no scope, another address", sidecarKnown, []Event{call}, "", "10.0.0.3:5000", "", true},
		{"no scope, sidecar address unknown", Origins{}, []Event{call}, "", "10.0.0.3:5000", "", false},
		{"agent scope, only the agent's call record", Origins{}, []Event{agentCall}, "agent", "10.0.0.3:5000", "", true},
		{"sidecar, only the agent's call record", Origins{}, []Event{agentCall}, "sidecar/fx/echo", "", KindAgentToolCall, false},
		{"agent scope, the agent's model request", Origins{}, []Event{model}, "agent", "10.0.0.3:5000", KindModelRequest, false},
		{"agent scope, model request and call share the id", Origins{}, []Event{model, call}, "agent", "10.0.0.3:5000", KindModelRequest, true},
		{"sidecar scope, model request and call share the id", Origins{}, []Event{model, call}, "sidecar/fx/echo", "", KindToolCall, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := append([]Event{}, tt.anchors...)
			ev = append(ev, Event{Time: at(120), Source: SourceGateway, Kind: KindEgress, Decision: "allow", OK: true,
				CorrelationID: id, Scope: tt.scope, Client: tt.client, Summary: "allow GET x:80", File: FileDecisions, Line: 7})
			sortEvents(ev)
			problems := link(ev, tt.origins)
			var d *Event
			for i := range ev {
				if ev[i].Kind == KindEgress {
					d = &ev[i]
				}
			}
			var got string
			if d.Parent != 0 {
				got = ev[d.Parent-1].Kind
			}
			if got != tt.parent {
				t.Errorf("decision hangs from %q, want %q", got, tt.parent)
			}
			if warned := d.Warning != ""; warned != tt.warned {
				t.Errorf("warning %q, want one: %v", d.Warning, tt.warned)
			}
			if tt.warned != (len(problems) == 1) || len(problems) > 1 {
				t.Fatalf("problems %v, want one: %v", problems, tt.warned)
			}
			if tt.warned {
				if p := problems[0]; p.File != FileDecisions || p.Line != 7 || !strings.Contains(p.Message, "tried to file its own egress under a tool call") {
					t.Errorf("problem %+v", p)
				}
				if !strings.Contains(d.Summary, "the agent's own request") {
					t.Errorf("summary %q does not say it is the agent's own", d.Summary)
				}
			}
		})
	}
}

// TestReadOrigins: the sidecar's addresses come from the harness's start
// results and collected metadata; a missing or invalid file leaves them
// unknown.
func TestReadOrigins(t *testing.T) {
	dir := t.TempDir()
	if o := ReadOrigins(dir); o.SidecarKnown() {
		t.Fatalf("empty directory: sidecar known %v", o.sidecar)
	}
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("mcp-sidecar-start-results.json", `[{"role":"sidecar","ip_addresses":{"n-internal":"10.1.2.3"}}]`)
	write("mcp-sidecar-metadata.json", `{"role":"sidecar","ip_addresses":{"n-internal":"fd00::3","bad":"not an address"}}`)
	o := ReadOrigins(dir)
	for client, want := range map[string]string{"10.1.2.3:1": OriginSidecar, "[fd00::3]:1": OriginSidecar, "10.1.2.4:1": OriginAgent, "": OriginUnknown} {
		if got := o.Of(&Event{Client: client}); got != want {
			t.Errorf("Of(client %q) = %q, want %q", client, got, want)
		}
	}
	write("mcp-sidecar-start-results.json", `{not json`)
	write("mcp-sidecar-metadata.json", `[]`)
	if o := ReadOrigins(dir); o.SidecarKnown() {
		t.Errorf("invalid files: sidecar known %v", o.sidecar)
	}
}
