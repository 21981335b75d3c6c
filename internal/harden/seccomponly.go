//go:build linux

package harden

import (
	"fmt"
	"time"
)

// ApplySeccomp installs p's seccomp filter and no_new_privs on every
// thread, and no Landlock ruleset: for the workload launcher's supervisor,
// which must keep signalling a child that is outside any Landlock domain of
// its own (Landlock's signal scope would refuse that). The Report lists the
// seccomp layers only.
func ApplySeccomp(p Policy) (Report, error) { return host.applySeccompOnly(p) }

func (s system) applySeccompOnly(p Policy) (rep Report, err error) {
	start := time.Now()
	rep = Report{Schema: ReportSchema, Role: p.Role, Layers: []LayerStatus{}, Degradations: []string{}, DeniedSyscalls: []string{}}
	defer func() {
		rep.DurationMicros = time.Since(start).Microseconds()
		rep.setError(err)
	}()
	if err := p.Validate(); err != nil {
		return rep, err
	}
	if err := s.noNewPrivs(); err != nil {
		return rep, fmt.Errorf("setting no_new_privs on all threads: %w", err)
	}
	rep.NoNewPrivs = true
	return rep, s.applySeccomp(p, false, &rep)
}
