package verdict

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// Names of the checks that hold whatever the workload: the record is
// complete even when the run ended under a call in flight.
const (
	CheckRolesStopped    = "roles stopped before the kill"
	CheckSidecarEgress   = "gateway: every sidecar tool request audited"
	auditKindCallStart   = "call_start"
	auditKindToolCall    = "tools/call"
	sidecarScopeRole     = "sidecar"
	exitKilled           = 128 + 9 // SIGKILL
	maxIDsInDetail       = 5
	decisionScopeToolLen = 3 // "sidecar/<server>/<tool>"
)

// Calls is what the sidecar's audit says about the tools/calls it started.
type Calls struct {
	// Started and Ended are the correlation ids of call_start lines and
	// of tools/call end lines.
	Started, Ended map[string]bool
	// Unended are the ids started with no end line: the sidecar died with
	// the call in flight (sorted).
	Unended []string
	// Interrupted counts end lines marked interrupted (cut off by the
	// sidecar's shutdown, and recorded).
	Interrupted int
}

// auditCallLine is the part of an audit line the call bookkeeping needs.
type auditCallLine struct {
	Kind          string `json:"kind"`
	CorrelationID string `json:"correlation_id"`
	Interrupted   bool   `json:"interrupted"`
}

// ReadCalls reads the call_start and tools/call lines of the audit at path.
func ReadCalls(path string) (Calls, error) {
	lines, err := readLines[auditCallLine](path)
	if err != nil {
		return Calls{}, err
	}
	c := Calls{Started: map[string]bool{}, Ended: map[string]bool{}}
	for _, l := range lines {
		switch l.Kind {
		case auditKindCallStart:
			c.Started[l.CorrelationID] = true
		case auditKindToolCall:
			c.Ended[l.CorrelationID] = true
			if l.Interrupted {
				c.Interrupted++
			}
		}
	}
	for id := range c.Started {
		if !c.Ended[id] {
			c.Unended = append(c.Unended, id)
		}
	}
	slices.Sort(c.Unended)
	return c, nil
}

// UnendedDetail is the failure detail for calls started with no end line,
// or "" when there are none.
func (c Calls) UnendedDetail() string {
	if len(c.Unended) == 0 {
		return ""
	}
	return fmt.Sprintf("%d tool calls started and have no end line (the sidecar was killed with them in flight; correlation ids %s)",
		len(c.Unended), idList(c.Unended))
}

// SidecarEgress checks the gateway's decision log against the sidecar's
// audit: every request the gateway judged for a sidecar tool call (scope
// "sidecar/<server>/<tool>") carries the correlation id of a call the
// audit shows started. Fail closed: an unreadable audit or decision log
// fails the check. The threat: a request that reached an upstream MCP
// server with no audit line (finding 2 of the second red team: a call in
// flight at teardown). Requests with no scope (no declared servers, or
// the Squid gateway) cannot be attributed and are counted in the detail.
func SidecarEgress(runDir string) agent.Check {
	c := agent.Check{Name: CheckSidecarEgress}
	calls, err := ReadCalls(filepath.Join(runDir, runs.FileAudit))
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	ds, err := readDecisionScopes(filepath.Join(runDir, runs.FileDecisions))
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	var tool, unscoped int
	missing := map[string]bool{}
	for _, d := range ds {
		parts := strings.Split(d.Scope, "/")
		switch {
		case d.Scope == "":
			unscoped++
		case parts[0] == sidecarScopeRole && len(parts) == decisionScopeToolLen:
			tool++
			if !calls.Started[d.CorrelationID] && !calls.Ended[d.CorrelationID] {
				missing[d.CorrelationID] = true
			}
		}
	}
	if len(missing) > 0 {
		ids := slices.Sorted(maps.Keys(missing))
		c.Detail = fmt.Sprintf("%d gateway requests for sidecar tool calls have no call in the audit (correlation ids %s)", len(missing), idList(ids))
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("%d requests for sidecar tool calls, each with its call in the audit (%d audited calls, %d interrupted); %d requests with no scope", tool, len(calls.Started), calls.Interrupted, unscoped)
	return c
}

type decisionScope struct {
	Scope         string `json:"scope"`
	CorrelationID string `json:"correlation_id"`
}

func readDecisionScopes(path string) ([]decisionScope, error) {
	return readLines[decisionScope](path)
}

// RolesStopped checks that every service role (gateway, sidecar) stopped
// by itself when the harness asked, rather than being killed after the
// grace: a role killed at teardown may have lost its last records. codes
// maps each stopped role to its exit code (nil: none recorded).
func RolesStopped(codes map[string]*int) agent.Check {
	c := agent.Check{Name: CheckRolesStopped}
	var killed []string
	for _, role := range slices.Sorted(maps.Keys(codes)) {
		switch code := codes[role]; {
		case code == nil:
			killed = append(killed, role+" (no exit code)")
		case *code == exitKilled:
			killed = append(killed, fmt.Sprintf("%s (exit code %d, SIGKILL)", role, *code))
		}
	}
	if len(killed) > 0 {
		c.Detail = "killed at teardown, its last records may be missing: " + strings.Join(killed, ", ")
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("%d roles exited by themselves", len(codes))
	return c
}

func idList(ids []string) string {
	if len(ids) > maxIDsInDetail {
		return strings.Join(ids[:maxIDsInDetail], ", ") + fmt.Sprintf(" and %d more", len(ids)-maxIDsInDetail)
	}
	return strings.Join(ids, ", ")
}
