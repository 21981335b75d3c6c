package verdict

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar"
)

// recordRun is a run directory's records, written with their producers'
// own writers and types, so the join reads what the roles write.
type recordRun struct {
	decisions []string // correlation ids of the decision lines
	counts    *egress.Counts
	rawCounts string // written instead of counts when set
	turns     []string
	calls     []sidecar.Record
}

const (
	idModel1 = "0af7651916cd43dd8448eb211c80319c"
	idModel2 = "1bf7651916cd43dd8448eb211c80319c"
	idSearch = "2cf7651916cd43dd8448eb211c80319c"
	idLocal  = "3df7651916cd43dd8448eb211c80319c"
)

func completeRun() recordRun {
	return recordRun{
		decisions: []string{idModel1, idModel2, idSearch, idModel1}, // the first model request retried
		counts:    &egress.Counts{Accepted: 4, Recorded: 4},
		turns:     []string{idModel1, idModel2},
		calls: []sidecar.Record{
			{Kind: sidecar.KindToolCall, Name: "microsoft_code_sample_search", OK: true, CorrelationID: idSearch},
			{Kind: sidecar.KindToolCall, Name: "get_answer_format", OK: true, CorrelationID: idLocal}, // local: no upstream
			{Kind: sidecar.KindToolCall, Name: "microsoft_docs_fetch", OK: false, CorrelationID: "4e" + idLocal[2:]},
		},
	}
}

func (rr recordRun) write(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var dl bytes.Buffer
	log := egress.NewDecisionLog(&dl)
	for _, id := range rr.decisions {
		if err := log.Record(egress.Decision{Time: time.Now().UTC(), Method: "POST", Host: "api.example", Decision: egress.Allow, CorrelationID: id}); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string][]byte{runs.FileDecisions: dl.Bytes()}
	switch {
	case rr.rawCounts != "":
		files[runs.FileEgressCounts] = []byte(rr.rawCounts)
	case rr.counts != nil:
		b, _ := json.Marshal(rr.counts)
		files[runs.FileEgressCounts] = b
	}
	if rr.turns != nil {
		var b bytes.Buffer
		for _, id := range rr.turns {
			line, _ := json.Marshal(agent.Turn{Kind: agent.KindModelRequest, CorrelationID: id})
			b.Write(append(line, '\n'))
		}
		files[runs.FileAgentTurns] = b.Bytes()
	}
	if rr.calls != nil {
		var b bytes.Buffer
		audit := sidecar.NewAuditLog(&b)
		for _, c := range rr.calls {
			c.Time = time.Now().UTC().Format(time.RFC3339Nano)
			audit.Write(c)
		}
		files[runs.FileAudit] = b.Bytes()
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRecordJoined: a verdict of ok means the decision log is complete;
// each way a record can show it is not fails the check, naming what is
// missing.
func TestRecordJoined(t *testing.T) {
	counted := RecordSources{Counted: true}
	squid := RecordSources{Why: "squid"}
	for _, tc := range []struct {
		name   string
		change func(*recordRun)
		src    RecordSources
		ok     bool
		want   string
	}{
		{"complete", func(*recordRun) {}, counted, true, "4 requests accepted, 4 lines written, 4 in the log; 2 model requests"},
		{"a model request's line removed", func(r *recordRun) {
			r.decisions = []string{idModel1, idSearch, idModel1}
			r.counts = &egress.Counts{Accepted: 3, Recorded: 3}
		}, counted, false, "1 of 2 model requests of the agent (agent-turns.jsonl) have no decision line (correlation ids " + idModel2 + ")"},
		{"an upstream call's line removed", func(r *recordRun) {
			r.decisions = []string{idModel1, idModel2, idModel1}
			r.counts = &egress.Counts{Accepted: 3, Recorded: 3}
		}, counted, false, "1 of 1 upstream tool calls in the sidecar's audit (mcp-sidecar-tool-calls.jsonl) have no decision line (correlation ids " + idSearch + ")"},
		{"a line removed from the log after the fact", func(r *recordRun) { r.decisions = r.decisions[:3] }, counted, false,
			"the gateway wrote 4 lines and egress-decisions.jsonl holds 3"},
		{"the gateway wrote fewer lines than it accepted", func(r *recordRun) { r.counts = &egress.Counts{Accepted: 6, Recorded: 4} }, counted, false,
			"the gateway accepted 6 requests and wrote 4 lines: 2 lines missing"},
		{"no counts (gateway killed)", func(r *recordRun) { r.counts = nil }, counted, false, "egress-counts.json is missing"},
		{"empty counts (gateway killed after opening it)", func(r *recordRun) { r.rawCounts = " " }, counted, false, "holds no counts"},
		{"own workload: counts only", func(r *recordRun) { r.turns, r.calls = nil, nil }, counted, true, "4 requests accepted, 4 lines written, 4 in the log"},
		{"squid: joined, not counted", func(r *recordRun) { r.counts = nil }, squid, true, "4 lines, not counted (squid)"},
		{"squid: a model request's line missing", func(r *recordRun) { r.counts, r.decisions = nil, []string{idSearch} }, squid, false, "2 of 2 model requests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := completeRun()
			tc.change(&rr)
			c := RecordJoined(rr.write(t), tc.src)
			if c.OK != tc.ok || !strings.Contains(c.Detail, tc.want) {
				t.Errorf("check %+v, want ok %v and a detail holding %q", c, tc.ok, tc.want)
			}
		})
	}
}

// TestRecordJoinedNoLog: a run with a gateway and no decision log fails.
func TestRecordJoinedNoLog(t *testing.T) {
	c := RecordJoined(t.TempDir(), RecordSources{Counted: true})
	if c.OK || !strings.Contains(c.Detail, "egress-decisions.jsonl is missing") {
		t.Errorf("check %+v, want a failure naming the missing log", c)
	}
}

// TestHeldValues: a line that says a held value was reflected or carried
// fails the run, naming the host and where; none passes.
func TestHeldValues(t *testing.T) {
	write := func(ds ...egress.Decision) string {
		dir := t.TempDir()
		var b bytes.Buffer
		log := egress.NewDecisionLog(&b)
		for _, d := range ds {
			log.Record(d)
		}
		os.WriteFile(filepath.Join(dir, runs.FileDecisions), b.Bytes(), 0o600)
		return dir
	}
	ok := egress.Decision{Method: "POST", Host: "api.example", Port: 443, Decision: egress.Allow, Credential: egress.CredentialInjected}
	reflected := ok
	reflected.Credential, reflected.HeldValue = egress.CredentialReflected, "the value of OPENAI_API_KEY (as is) in the answer header X-Echo-Auth"
	carried := egress.Decision{Method: "GET", Host: "other.example", Port: 80, Decision: egress.Deny, Credential: egress.CredentialCarried,
		HeldValue: "the value of OPENAI_API_KEY (base64) in the request body"}
	if c := HeldValues(write(ok, ok)); !c.OK {
		t.Errorf("clean log: %+v", c)
	}
	if c := HeldValues(write(ok, reflected)); c.OK || !strings.Contains(c.Detail, "api.example:443 reflected the value of OPENAI_API_KEY (as is) in the answer header X-Echo-Auth") {
		t.Errorf("reflected: %+v", c)
	}
	if c := HeldValues(write(carried)); c.OK || !strings.Contains(c.Detail, "a request to other.example:80 carried the value of OPENAI_API_KEY (base64) in the request body") {
		t.Errorf("carried: %+v", c)
	}
	if c := HeldValues(t.TempDir()); c.OK {
		t.Errorf("no log: %+v", c)
	}
}
