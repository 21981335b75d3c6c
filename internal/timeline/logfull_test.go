package timeline

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar"
)

// TestLogFullLines: the last line a full decision log or audit log ends
// with (written by the producers' own logs, filled through a tiny
// budget) is read as a failed log_full event saying so, not as a problem,
// and the report renders.
func TestLogFullLines(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var decisions bytes.Buffer
	dl := egress.NewDecisionLog(&decisions)
	dl.SetBudget(1)
	dl.Record(egress.Decision{Time: start, RunID: "r", Method: "GET", Host: "api.allowed.test", Port: 80, Decision: egress.Allow})
	writeBytes(t, dir, FileDecisions, decisions.Bytes())
	var audit bytes.Buffer
	al := sidecar.NewAuditLog(&audit)
	al.SetBudget(1)
	al.Write(sidecar.Record{Time: start.Format(time.RFC3339Nano), Kind: sidecar.KindCallStart, Name: "search", CorrelationID: "0af7651916cd43dd8448eb211c80319c"})
	writeBytes(t, dir, FileAudit, audit.Bytes())

	tl, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range tl.Problems {
		if s := fmt.Sprint(p); strings.Contains(s, FileDecisions) || strings.Contains(s, FileAudit) {
			t.Errorf("problem: %s", s)
		}
	}
	want := map[string]string{FileDecisions: egress.ReasonLogFull, FileAudit: sidecar.ReasonAuditFull}
	for _, e := range tl.Events {
		if e.Kind != KindLogFull {
			continue
		}
		if e.OK || !strings.HasPrefix(e.Summary, want[e.File]) {
			t.Errorf("%s event: ok %v, summary %q; want failed, %q", e.File, e.OK, e.Summary, want[e.File])
		}
		delete(want, e.File)
	}
	if len(want) != 0 {
		t.Errorf("no log_full event from %v", want)
	}
	var html bytes.Buffer
	if err := tl.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "decision log full") {
		t.Error("the report does not show the full decision log")
	}
}
