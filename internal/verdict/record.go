package verdict

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learn"
)

// CheckRecordJoined is the check that the gateway's decision log holds a
// line for every request the other records prove was made.
const CheckRecordJoined = "records: every request has its decision line"

// RecordSources says what the decision log of a run can be joined with.
type RecordSources struct {
	// Counted: the built-in gateway wrote its counts at exit
	// (runs.FileEgressCounts), and they must agree with its log. False
	// for the Squid engine, which keeps no such count, and for a kept
	// run, whose gateway has not exited.
	Counted bool
	// Why is what the detail says when Counted is false.
	Why string
}

// egressCounts is runs.FileEgressCounts (egress.Counts).
type egressCounts struct {
	Accepted *int64 `json:"accepted"`
	Recorded *int64 `json:"recorded"`
}

// decisionRef is the part of a decision line the join needs.
type decisionRef struct {
	CorrelationID string `json:"correlation_id"`
	LogFull       bool   `json:"log_full"`
}

// RecordJoined joins what the records of runDir say against each other,
// so that a verdict of ok means the decision log is complete. The threat
// (issue 26): a request that reached its upstream, a model's with the
// real key injected, with no decision line, in a run whose verdict said
// ok. It fails, naming what is missing, when
//   - the gateway's counts (src.Counted) are absent or empty (it did not
//     exit by itself, so its record cannot be shown complete), say it
//     accepted more requests than it wrote lines for, or disagree with the
//     lines in the log;
//   - a model request of the agent (agent-turns.jsonl, when the run has
//     one) has no line with its correlation id;
//   - a tool call the sidecar's audit shows answered by an upstream (a
//     Learn tool or a declared server's) has no line with its id.
//
// A decision log that is absent or unreadable fails the check.
func RecordJoined(runDir string, src RecordSources) agent.Check {
	c := agent.Check{Name: CheckRecordJoined}
	lines, err := readLines[decisionRef](filepath.Join(runDir, runs.FileDecisions))
	if err != nil {
		c.Detail = "the decision log cannot be read: " + err.Error()
		return c
	}
	byID := map[string]int{}
	n := 0
	for _, l := range lines {
		if l.LogFull {
			continue // the marker: LogsNotFull fails the run for it
		}
		n++
		byID[l.CorrelationID]++
	}
	var problems, joined []string
	if src.Counted {
		p, d := checkCounts(runDir, n)
		problems, joined = append(problems, p...), append(joined, d)
	} else {
		joined = append(joined, fmt.Sprintf("%d lines, not counted (%s)", n, src.Why))
	}
	for _, j := range []struct {
		what string
		ids  func(string) ([]string, bool, error)
	}{
		{"model requests of the agent (" + runs.FileAgentTurns + ")", modelRequestIDs},
		{"upstream tool calls in the sidecar's audit (" + runs.FileAudit + ")", upstreamCallIDs},
	} {
		ids, present, err := j.ids(runDir)
		switch {
		case !present:
			continue
		case err != nil:
			problems = append(problems, err.Error())
			continue
		}
		var missing []string
		for _, id := range ids {
			if byID[id] == 0 {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			problems = append(problems, fmt.Sprintf("%d of %d %s have no decision line (correlation ids %s)", len(missing), len(ids), j.what, idList(missing)))
			continue
		}
		joined = append(joined, fmt.Sprintf("%d %s, each with its line", len(ids), j.what))
	}
	if len(problems) > 0 {
		c.Detail = strings.Join(problems, "; ")
		return c
	}
	c.OK, c.Detail = true, strings.Join(joined, "; ")
	return c
}

// checkCounts compares the gateway's counts with the n lines of its log.
func checkCounts(runDir string, n int) (problems []string, detail string) {
	b, err := readSmall(filepath.Join(runDir, runs.FileEgressCounts))
	if err != nil {
		return []string{fmt.Sprintf("the gateway's counts cannot be read (%v): it did not exit by itself, and its record cannot be shown complete", err)}, ""
	}
	var ec egressCounts
	if err := json.Unmarshal(b, &ec); err != nil || ec.Accepted == nil || ec.Recorded == nil {
		return []string{fmt.Sprintf("%s holds no counts (%d bytes): the gateway did not exit by itself, and its record cannot be shown complete", runs.FileEgressCounts, len(b))}, ""
	}
	a, r := *ec.Accepted, *ec.Recorded
	if a != r {
		problems = append(problems, fmt.Sprintf("the gateway accepted %d requests and wrote %d lines: %d lines missing", a, r, a-r))
	}
	if r != int64(n) {
		problems = append(problems, fmt.Sprintf("the gateway wrote %d lines and %s holds %d", r, runs.FileDecisions, n))
	}
	return problems, fmt.Sprintf("%d requests accepted, %d lines written, %d in the log", a, r, n)
}

// modelRequestIDs are the correlation ids of the agent's model requests;
// present is false when the run has no agent-turns.jsonl (not the agent).
func modelRequestIDs(runDir string) ([]string, bool, error) {
	path := filepath.Join(runDir, runs.FileAgentTurns)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	turns, err := readLines[agent.Turn](path)
	if err != nil {
		return nil, true, err
	}
	var ids []string
	for _, t := range turns {
		if t.Kind == agent.KindModelRequest && t.CorrelationID != "" {
			ids = append(ids, t.CorrelationID)
		}
	}
	return ids, true, nil
}

// upstreamCallIDs are the correlation ids of the audit's successful tool
// calls that only an upstream can answer: the Learn tools and the tools
// of declared servers. Each went out through the gateway.
func upstreamCallIDs(runDir string) ([]string, bool, error) {
	path := filepath.Join(runDir, runs.FileAudit)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	lines, err := readLines[upstreamAuditLine](path)
	if err != nil {
		return nil, true, err
	}
	var ids []string
	for _, l := range lines {
		if l.Kind == auditKindToolCall && l.OK && l.CorrelationID != "" && (l.Server != "" || isLearnTool(l.Name)) {
			ids = append(ids, l.CorrelationID)
		}
	}
	return ids, true, nil
}

type upstreamAuditLine struct {
	Kind          string `json:"kind"`
	Name          string `json:"name"`
	OK            bool   `json:"ok"`
	Server        string `json:"server"`
	CorrelationID string `json:"correlation_id"`
}

func isLearnTool(name string) bool {
	return slices.ContainsFunc(learn.Tools(), func(t learn.Tool) bool { return t.Name == name })
}

// CheckHeldValues is the check that no held credential value was seen
// where it does not belong.
const CheckHeldValues = "credentials: no held value reflected or carried"

// heldLine is the part of a decision line this check needs.
type heldLine struct {
	Host       string `json:"host"`
	Port       int    `json:"port"`
	Credential string `json:"credential"`
	HeldValue  string `json:"held_value"`
}

// Decision-line values of egress.Decision.Credential (egress held.go).
const (
	credentialReflected = "reflected"
	credentialCarried   = "carried"
)

// HeldValues fails the run when the gateway saw a held credential value
// in an answer (scrubbed before the workload read it: an upstream
// reflects the key) or in a request to a host that is not the value's own
// (refused: the workload had learned a value). Either way the run did not
// keep the key where the spec put it, and the detail names the host and
// where the value was seen, never the value (issue 27). A decision log
// that cannot be read fails the check.
func HeldValues(runDir string) agent.Check {
	c := agent.Check{Name: CheckHeldValues}
	lines, err := readLines[heldLine](filepath.Join(runDir, runs.FileDecisions))
	if err != nil {
		c.Detail = "the decision log cannot be read: " + err.Error()
		return c
	}
	var seen []string
	for _, l := range lines {
		switch l.Credential {
		case credentialReflected:
			seen = append(seen, fmt.Sprintf("%s:%d reflected %s", l.Host, l.Port, l.HeldValue))
		case credentialCarried:
			seen = append(seen, fmt.Sprintf("a request to %s:%d carried %s (refused)", l.Host, l.Port, l.HeldValue))
		}
	}
	if len(seen) > 0 {
		c.Detail = fmt.Sprintf("%d requests: %s", len(seen), strings.Join(seen[:min(len(seen), maxIDsInDetail)], "; "))
		return c
	}
	c.OK, c.Detail = true, fmt.Sprintf("%d decision lines, no held value seen in an answer or in a request to another host", len(lines))
	return c
}
