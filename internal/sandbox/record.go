package sandbox

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/verdict"
)

// verdict judges the run from its record (internal/verdict, Judge): the
// collected run directory and what the lifecycle saw, whatever the
// backend; the backend adds its own checks. A run that never reached the
// workload has a failed verdict and no further error.
func (j *job) verdict(runErr error) error {
	if j.dir == nil {
		return nil
	}
	places, held := j.credentials()
	j.meta.Credentials = places
	jd := verdict.Judge(j.record(runErr, places, held))
	for _, d := range jd.Degradations {
		j.meta.Degradations = append(j.meta.Degradations, d)
		fmt.Fprintf(j.s.Err, "warning: %s\n", d)
	}
	v := runs.Verdict{Checks: append([]runs.Check{}, jd.Checks...)}
	if j.o.Checks != nil {
		v.Checks = append(v.Checks, j.o.Checks(j.dir.Path, &j.meta)...)
	}
	v.OK = len(v.Checks) > 0
	var failed []string
	for _, c := range v.Checks {
		v.OK = v.OK && c.OK
		if !c.OK {
			failed = append(failed, c.Name+": "+c.Detail)
		}
	}
	j.meta.Verdict = v
	err := jd.Err
	if err == nil && runErr == nil && !v.OK {
		err = fmt.Errorf("verdict: failed checks: %s", strings.Join(failed, "; "))
	}
	return err
}

// record is the run's record for the verdict. The backend's checks are
// asked here, once the artifacts are collected.
func (j *job) record(runErr error, places []runs.Credential, held []verdict.HeldValue) verdict.Record {
	r := verdict.Record{
		Dir: j.dir.Path, Workload: verdict.Workload(j.o.Workload), Own: j.own != nil, Question: j.o.Question,
		AgentExit: j.agentExit, RunErr: runErr, Stdout: j.stdout.Bytes(), Stderr: j.stderr.Bytes(),
		AllowOldEngine: j.o.AllowOldEngine, OldEngine: j.oldEngine(),
		Keep: j.o.Keep, Squid: j.o.squid(), Hardening: j.meta.Hardening, Observed: j.meta.Observed, ObserveAll: j.observeAll, OutputOver: j.outputOver,
	}
	if j.o.Workload == orchestrate.WorkloadProbe && j.agentExit != nil {
		r.Isolation = j.backend.Isolation(j.run)
	}
	if slices.ContainsFunc(places, func(p runs.Credential) bool { return p.Lives == spec.LivesGateway }) {
		r.Held = append([]verdict.HeldValue{}, held...)
	}
	if j.sess == nil {
		return r
	}
	r.Started, r.Policies = true, map[string]harden.Policy{}
	for _, st := range j.sess.Plan.Containers {
		r.Planned = append(r.Planned, st.Role)
		r.Policies[st.Role] = j.hardenPolicy(st.Role)
	}
	for _, c := range j.sess.Containers {
		r.Containers = append(r.Containers, verdict.Container{Role: c.Step.Role, Workload: c.Step.Workload,
			Started: c.Pid != 0 || c.ExitCode != nil || c.KilledAtStop, ExitCode: c.ExitCode, KilledAtStop: c.KilledAtStop})
	}
	r.Backend = j.backend.Checks(j.run)
	return r
}

// hardenPolicy is the policy role's report is judged against: the probe
// suite's own for a test-sandbox workload.
func (j *job) hardenPolicy(role string) harden.Policy {
	if role == orchestrate.RoleAgent && j.o.Workload == orchestrate.WorkloadProbe {
		return j.profile.Probe().Harden
	}
	return j.profile.Containers[role].Harden
}
