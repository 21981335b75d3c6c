package verdict

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar"
	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

// TestLogsNotFull writes the logs with their producers' own writers, the
// full ones through a tiny budget, and checks the verdict's reading.
func TestLogsNotFull(t *testing.T) {
	deny := egress.Decision{Time: time.Now().UTC(), RunID: "r", Method: "GET", Host: "denied.example", Decision: egress.Deny, Reason: "not allowed"}
	call := sidecar.Record{Time: time.Now().UTC().Format(time.RFC3339Nano), Kind: sidecar.KindToolCall, Name: "search", OK: true,
		CorrelationID: "0af7651916cd43dd8448eb211c80319c"}
	decisions := func(budget int64, n int) []byte {
		var b bytes.Buffer
		l := egress.NewDecisionLog(&b)
		l.SetBudget(budget)
		for range n {
			l.Record(deny)
		}
		return b.Bytes()
	}
	audit := func(budget int64, n int) []byte {
		var b bytes.Buffer
		l := sidecar.NewAuditLog(&b)
		l.SetBudget(budget)
		for range n {
			l.Write(call)
		}
		return b.Bytes()
	}
	for _, tc := range []struct {
		name           string
		decisions, aud []byte
		ok             bool
		want           string
	}{
		{"both within budget", decisions(1<<20, 3), audit(1<<20, 3), true, "not full: " + runs.FileDecisions + ", " + runs.FileAudit},
		{"no logs", nil, nil, true, "no decision or audit log"},
		{"decision log full", decisions(500, 10), audit(1<<20, 3), false, runs.FileDecisions + " ended full at line"},
		{"audit log full", decisions(1<<20, 3), audit(500, 10), false, runs.FileAudit + " ended full at line"},
		{"cut line", append(decisions(1<<20, 1), `{"time":"2026-`...), nil, false, "does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, b := range map[string][]byte{runs.FileDecisions: tc.decisions, runs.FileAudit: tc.aud} {
				if b != nil {
					if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			c := LogsNotFull(dir)
			if c.OK != tc.ok || !strings.Contains(c.Detail, tc.want) {
				t.Errorf("LogsNotFull = %v %q, want %v and %q", c.OK, c.Detail, tc.ok, tc.want)
			}
			if !tc.ok && strings.Contains(tc.want, "full") && !strings.Contains(c.Detail, "refuses all") {
				t.Errorf("detail %q does not say the role refused everything", c.Detail)
			}
		})
	}
	t.Run("expected log absent", func(t *testing.T) {
		c := LogsNotFull(t.TempDir(), runs.FileAudit)
		if c.OK || !strings.Contains(c.Detail, runs.FileAudit+" is missing") {
			t.Errorf("LogsNotFull = %v %q, want a failure naming the missing audit log", c.OK, c.Detail)
		}
	})
}

// TestLogFullWire: the fields the check reads are the ones each producer
// writes (the audit has no reason; its error says it).
func TestLogFullWire(t *testing.T) {
	testutil.WireFieldsCovered(t, runs.FileDecisions, logFullLine{}, egress.Decision{})
	testutil.WireFieldsCovered(t, runs.FileAudit, logFullLine{}, sidecar.Record{}, "reason")
}
