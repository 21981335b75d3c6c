package verdict

import (
	"path/filepath"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// Workload is what ran in the agent-role container.
type Workload string

// The workloads, by the lifecycle's names for them.
const (
	WorkloadAgent Workload = "agent"       // the model loop (run), or a user's own workload
	WorkloadCheck Workload = "agent-check" // the connectivity check (doctor)
	WorkloadProbe Workload = "probe"       // the probe suite (test-sandbox)
)

// Record is what a run left, whatever backend ran it: the run directory
// (Dir, holding the collected artifacts) and what the lifecycle saw. The
// verdict reads nothing else.
type Record struct {
	Dir      string
	Workload Workload
	// Own: the workload is the user's (run --image), not our agent.
	Own      bool
	Question string // the agent's question; "" is the seed's
	// AgentExit is the workload's exit code; nil: it did not run (RunErr
	// says why).
	AgentExit *int
	RunErr    error
	// Stdout and Stderr are the workload's streams as the host kept them.
	Stdout, Stderr []byte
	// AllowOldEngine: the user accepted an engine older than 26, and
	// OldEngine: it is one (doctor's no-route row is then a degradation).
	AllowOldEngine, OldEngine bool

	// Started: the plan was handed to the backend; the checks of what ran
	// apply from then on.
	Started bool
	Keep    bool // --keep: nothing was stopped
	Squid   bool // the Squid gateway: no in-process hardening, no counts
	// Planned are the plan's roles, in its order; Containers what the
	// backend created of them, in its order.
	Planned    []string
	Containers []Container
	// Hardening and Observed are each role's report, as collected, and
	// what was seen of its process from outside (runs.Metadata).
	Hardening map[string]runs.RoleHardening
	Observed  map[string]runs.Observation
	// ObserveAll: the backend reads every started role's process from
	// outside (but a Squid gateway's); a started role with no
	// observation fails its check, as one that could not be read.
	ObserveAll bool
	// Policies are the roles' hardening policies.
	Policies map[string]harden.Policy
	// OutputOver says, for each role whose output passed its cap, what did.
	OutputOver map[string]string
	// Held is nil when no credential lives at the gateway; else the
	// values the gateway held (never written anywhere).
	Held []HeldValue
	// Backend are the backend's own checks; Isolation its measures of the
	// isolation (test-sandbox): one that fails is a violation.
	Backend, Isolation []runs.Check
}

// Container is one container (or pod) the backend created.
type Container struct {
	Role     string
	Workload bool // the agent-role container
	// Started: the backend reports it ran (a process, an exit code, or a
	// kill at the stop); a service never started is not judged stopped.
	Started      bool
	ExitCode     *int
	KilledAtStop bool
}

// HeldValue is one credential value the gateway held.
type HeldValue struct{ Variable, Value string }

// Judgement is the verdict's answer: its checks, in order, the
// degradations it accepted (recorded and printed by the caller), and the
// error the run ends with beyond the checks (a violation: exit 4).
type Judgement struct {
	Checks       []runs.Check
	Degradations []string
	Err          error
}

// Judge checks a run's record: the workload's own checks (run, doctor,
// test-sandbox, a user's workload), then, once the plan was started, each
// role's hardening, the backend's checks, the credentials, the output
// caps and the record's completeness.
func Judge(r Record) Judgement {
	var j Judgement
	j.workload(r)
	if !r.Started {
		return j
	}
	j.Checks = append(j.Checks, hardeningChecks(r)...)
	if err := kernelRefusal(r); err != nil && j.Err == nil {
		j.Err = err
	}
	j.Checks = append(j.Checks, r.Backend...)
	j.Checks = append(j.Checks, credentialChecks(r)...)
	j.Checks = append(j.Checks, outputCapChecks(r.OutputOver, r.Planned)...)
	j.Checks = append(j.Checks, teardownChecks(r)...)
	return j
}

// workload adds the checks of what the workload was.
func (j *Judgement) workload(r Record) {
	switch {
	case r.AgentExit == nil:
		j.Checks = append(j.Checks, runs.Check{Name: "workload ran", Detail: errText(r.RunErr, "the workload did not run")})
	case r.Own && r.Workload == WorkloadAgent:
		j.Checks = append(j.Checks, OwnWorkload(r.Dir, *r.AgentExit, r.planned(roleSidecar))...)
	case r.Workload == WorkloadAgent:
		rc := CheckRunExit(r.Dir, *r.AgentExit, r.Question)
		for _, c := range rc.Checks {
			j.Checks = append(j.Checks, fromAgent(c))
		}
	case r.Workload == WorkloadCheck:
		checks, degraded := CheckTable(string(r.Stdout), *r.AgentExit, r.AllowOldEngine && r.OldEngine)
		j.Checks = append(j.Checks, checks...)
		j.Degradations = append(j.Degradations, degraded...)
	case r.Workload == WorkloadProbe:
		j.probe(r)
	}
}

// hardeningChecks: each role's report lists every layer its policy
// requires as enforced, and what the host saw of its process agrees (a
// seccomp filter of ours on top of the engine's, no_new_privs, no
// capabilities, not root).
func hardeningChecks(r Record) []runs.Check {
	var checks []runs.Check
	for _, c := range r.Containers {
		if c.Role == roleGateway && r.Squid {
			continue // Squid applies no in-process layer (a recorded degradation)
		}
		checks = append(checks, ReportCheck(c.Role, r.Policies[c.Role], r.Hardening[c.Role], c.ExitCode))
		ob, ok := r.Observed[c.Role]
		if !ok && r.ObserveAll && c.Started {
			why := "the host made no observation of the role's process"
			ob, ok = runs.Observation{Detail: "not observed: " + why, Unproven: why}, true
		}
		if ok {
			checks = append(checks, ObservedCheck(c.Role, ob))
		}
	}
	return checks
}

// credentialChecks prove from the host what the probes claim from
// inside: no file of the run directory (each role's own output folder
// included, as the container wrote it, before any redaction) and neither
// of the workload's streams holds the value of a credential the gateway
// held. For doctor it also checks that the gateway recorded the model
// requests `agent --check` sent without the placeholder as refused, and
// injected nothing. Threat: a key that reached the sandbox, or a gateway
// that logged it, leaves it in a record shared for review.
func credentialChecks(r Record) []runs.Check {
	if r.Held == nil {
		return nil
	}
	checks := []runs.Check{HeldStayed(r.Dir, r.Held, r.Stdout, r.Stderr)}
	if r.Workload == WorkloadCheck {
		checks = append(checks, RefusalsRecorded(filepath.Join(r.Dir, roleGateway, runs.FileDecisions)))
	}
	return checks
}

// outputCapChecks: a role whose output passed its cap fails its check.
func outputCapChecks(over map[string]string, roles []string) []runs.Check {
	var checks []runs.Check
	for _, role := range roles {
		if what, ok := over[role]; ok {
			checks = append(checks, runs.Check{Name: role + " output within its cap", Detail: what})
		}
	}
	return checks
}

// teardownChecks: the record is complete even when the run ended under a
// call in flight. No role was killed at the stop (its last lines could be
// lost; skipped with --keep, where nothing is stopped), and every gateway
// request made for a sidecar tool call has its call in the audit, and
// neither the decision log nor the audit log filled.
func teardownChecks(r Record) []runs.Check {
	var out []runs.Check
	if !r.Keep {
		codes := map[string]*int{}
		for _, c := range r.Containers {
			if c.Workload || !c.Started {
				continue // the workload, or a service never started
			}
			code := c.ExitCode
			if c.KilledAtStop {
				killed := 128 + 9
				code = &killed
			}
			codes[c.Role] = code
		}
		out = append(out, fromAgent(RolesStopped(codes)))
	}
	if r.AgentExit != nil && r.planned(roleSidecar) { // no sidecar: no tool call to join
		out = append(out, fromAgent(SidecarEgress(r.Dir)))
	}
	// A log that filled ends the record early, whatever the workload.
	var expect []string
	if r.planned(roleGateway) {
		expect = append(expect, runs.FileDecisions)
	}
	if r.planned(roleSidecar) {
		expect = append(expect, runs.FileAudit)
	}
	out = append(out, fromAgent(LogsNotFull(r.Dir, expect...)))
	if r.planned(roleGateway) {
		out = append(out, fromAgent(RecordJoined(r.Dir, r.recordSources())))
		if !r.Squid { // Squid holds no credential and searches nothing
			out = append(out, fromAgent(HeldValues(r.Dir)))
		}
	}
	return out
}

// The plan's role names (orchestrate.RoleGateway, RoleSidecar, RoleAgent).
const (
	roleGateway = "gateway"
	roleSidecar = "sidecar"
	roleAgent   = "agent"
)

func (r Record) planned(role string) bool {
	for _, p := range r.Planned {
		if p == role {
			return true
		}
	}
	return false
}

// recordSources says what the verdict can join the decision log with:
// the built-in gateway's counts, unless Squid is the gateway (it keeps
// none) or the run is kept (its gateway has not exited).
func (r Record) recordSources() RecordSources {
	switch {
	case r.Squid:
		return RecordSources{Why: "the Squid engine keeps no count of the requests it accepted: only the requests the other records name are joined"}
	case r.Keep:
		return RecordSources{Why: "--keep: the gateway has not exited, so it has not counted"}
	}
	return RecordSources{Counted: true}
}

func fromAgent(c agent.Check) runs.Check {
	return runs.Check{Name: c.Name, OK: c.OK, Detail: c.Detail}
}

func errText(err error, def string) string {
	if err != nil {
		return firstLine(err.Error())
	}
	return def
}

func firstLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
