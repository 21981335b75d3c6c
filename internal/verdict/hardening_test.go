package verdict

import (
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

func TestReportCheck(t *testing.T) {
	pol := harden.Policy{NoSpawn: true, DenyUnixSockets: true, BestEffort: []string{harden.LayerLandlockNet}}
	layers := func(names ...string) runs.RoleHardening {
		h := runs.RoleHardening{Source: runs.SourceRoleReport}
		for _, n := range names {
			h.Layers = append(h.Layers, runs.HardeningLayer{Name: n, Enforced: true})
		}
		return h
	}
	one, zero := 1, 0
	for _, tt := range []struct {
		name   string
		h      runs.RoleHardening
		exit   *int
		ok     bool
		detail string
	}{
		{"complete", layers(harden.LayerLandlockFS, harden.LayerSyscallDeny, harden.LayerNoSpawn, harden.LayerNoUnix), nil, true, ""},
		// A forged report that leaves out the no-spawn filter.
		{"forged, a layer missing", layers(harden.LayerLandlockFS, harden.LayerSyscallDeny, harden.LayerNoUnix), nil, false, "no-spawn"},
		{"listed but not enforced", func() runs.RoleHardening {
			h := layers(harden.LayerLandlockFS, harden.LayerSyscallDeny, harden.LayerNoUnix)
			h.Layers = append(h.Layers, runs.HardeningLayer{Name: harden.LayerNoSpawn})
			return h
		}(), nil, false, "no-spawn"},
		{"no report from a role that exited 0", runs.RoleHardening{}, &zero, false, "no hardening report"},
		{"no report from a role that failed", runs.RoleHardening{}, &one, true, "exited with code 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := ReportCheck("agent", pol, tt.h, tt.exit)
			if c.OK != tt.ok || !strings.Contains(c.Detail, tt.detail) {
				t.Errorf("got ok=%v %q, want ok=%v containing %q", c.OK, c.Detail, tt.ok, tt.detail)
			}
		})
	}
}

func TestObservedCheck(t *testing.T) {
	good := runs.Observation{Seen: true, Seccomp: 2, SeccompFilters: 2, NoNewPrivs: true, CapEff: "0000000000000000", UID: 65532}
	for _, tt := range []struct {
		name   string
		mut    func(*runs.Observation)
		ok     bool
		detail string
	}{
		{"hardened", func(*runs.Observation) {}, true, "seccomp filters 2"},
		{"only Docker's filter", func(o *runs.Observation) { o.SeccompFilters = 1 }, false, "1 filter"},
		{"no seccomp", func(o *runs.Observation) { o.Seccomp, o.SeccompFilters = 0, 0 }, false, "seccomp mode 0"},
		{"no no_new_privs", func(o *runs.Observation) { o.NoNewPrivs = false }, false, "no_new_privs"},
		{"capabilities", func(o *runs.Observation) { o.CapEff = "00000000a80425fb" }, false, "capabilities"},
		{"root", func(o *runs.Observation) { o.UID = 0 }, false, "root"},
		{"not seen", func(o *runs.Observation) { *o = runs.Observation{Detail: "not observed: gone"} }, false, "not observed: gone"},
		{"not seen, no detail", func(o *runs.Observation) { *o = runs.Observation{} }, false, "not observed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ob := good
			tt.mut(&ob)
			c := ObservedCheck("agent", ob)
			if c.OK != tt.ok || !strings.Contains(c.Detail, tt.detail) {
				t.Errorf("got ok=%v %q, want ok=%v containing %q", c.OK, c.Detail, tt.ok, tt.detail)
			}
		})
	}
}

// TestObserveAll: on a backend that observes every role, a started role
// with no observation fails its outside check (it was not looked at); a
// role that never started, and a Squid gateway, are not judged; a
// backend that does not observe gets no such check.
func TestObserveAll(t *testing.T) {
	zero := 0
	r := Record{
		ObserveAll: true, Squid: true,
		Containers: []Container{
			{Role: roleGateway, Started: true, ExitCode: &zero},
			{Role: "mcp-sidecar", Started: true, ExitCode: &zero},
			{Role: "agent", Workload: true},
		},
		Observed: map[string]runs.Observation{},
	}
	var got []runs.Check
	for _, c := range hardeningChecks(r) {
		if strings.HasSuffix(c.Name, "seen from outside") {
			got = append(got, c)
		}
	}
	if len(got) != 1 || got[0].Name != "mcp-sidecar hardening seen from outside" || got[0].OK ||
		!strings.Contains(got[0].Detail, "no observation") {
		t.Fatalf("got %+v, want one failed check for the started sidecar", got)
	}
	r.ObserveAll = false
	for _, c := range hardeningChecks(r) {
		if strings.HasSuffix(c.Name, "seen from outside") {
			t.Errorf("a backend that does not observe got %+v", c)
		}
	}
}

// TestOwnWorkloadWithoutSidecar: a plan without a sidecar has no audit to
// complete; with one, a missing audit fails.
func TestOwnWorkloadWithoutSidecar(t *testing.T) {
	dir := t.TempDir()
	if cs := OwnWorkload(dir, 0, false); len(cs) != 1 || cs[0].Name != CheckWorkloadExit || !cs[0].OK {
		t.Errorf("no sidecar: %+v", cs)
	}
	cs := OwnWorkload(dir, 0, true)
	if len(cs) != 2 || cs[1].Name != CheckWorkloadAudit || cs[1].OK {
		t.Errorf("a sidecar with no audit: %+v", cs)
	}
}
