//go:build linux

package probe

import (
	"strings"
	"testing"
)

func capWith(tool, shell, alts Outcome) *Capability {
	return &Capability{Tool: Result{Outcome: tool}, Shell: Result{Outcome: shell}, Alternates: Alternates{Outcome: alts}}
}

func TestJudge(t *testing.T) {
	tests := []struct {
		name              string
		goal              Goal
		tool, shell, alts Outcome
		want              Verdict
		expected          string
	}{
		{"deny: denied passes", GoalDeny, Denied, NA, NA, Pass, "Denied"},
		{"deny: absent surface passes", GoalDeny, NA, NA, NA, Pass, "Denied"},
		{"deny: tool allowed is a violation", GoalDeny, Allowed, NA, NA, Violation, "Denied"},
		{"deny: shell bypass is a violation", GoalDeny, Denied, Allowed, NA, Violation, "Denied"},
		{"deny: alternate bypass is a violation", GoalDeny, Denied, Denied, Allowed, Violation, "Denied"},
		{"deny: error is unsupported", GoalDeny, Error, NA, NA, Unsupported, "Denied"},
		{"allow: allowed passes", GoalAllow, Allowed, NA, NA, Pass, "Allowed"},
		{"allow: denied is a violation", GoalAllow, Denied, NA, NA, Violation, "Allowed"},
		{"allow: not attempted is unsupported", GoalAllow, NA, NA, NA, Unsupported, "Allowed"},
		{"allow: error is unsupported", GoalAllow, Error, NA, NA, Unsupported, "Allowed"},
		{"any: allowed passes", GoalAny, Allowed, Allowed, Allowed, Pass, "Allowed or Denied"},
		{"any: denied passes", GoalAny, Denied, NA, NA, Pass, "Allowed or Denied"},
		{"any: error is unsupported", GoalAny, Error, NA, NA, Unsupported, "Allowed or Denied"},
		{"context: unconfigured is unsupported", GoalContext, NA, NA, NA, Unsupported, "N/A"},
		{"none: windows-only is unsupported", GoalNone, NA, NA, NA, Unsupported, "N/A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := capWith(tt.tool, tt.shell, tt.alts)
			Judge(tt.goal, c)
			if c.Verdict != tt.want || c.Expected != tt.expected {
				t.Errorf("got verdict %q expected %q, want %q %q", c.Verdict, c.Expected, tt.want, tt.expected)
			}
			if c.VerdictReason == "" {
				t.Error("verdict has no reason")
			}
		})
	}
}

func TestGoalAdjustments(t *testing.T) {
	spawn := Probe{Goal: GoalDeny, Spawn: true}
	plain := Probe{Goal: GoalDeny}
	shell := &Context{Capabilities: []string{"network", "shell_access"}}
	def := &Context{Capabilities: []string{"network"}}
	if g := spawn.goal(shell); g != GoalAny {
		t.Errorf("spawn probe under shell_access: got %v, want GoalAny", g)
	}
	if g := spawn.goal(def); g != GoalDeny {
		t.Errorf("spawn probe by default: got %v, want GoalDeny", g)
	}
	if g := plain.goal(shell); g != GoalDeny {
		t.Errorf("non-spawn probe under shell_access: got %v, want GoalDeny", g)
	}
}

// TestCatalogueShape checks the catalogue against the seed's: every group
// G01-G22, G30 and G40, unique ids, the seed's id gaps kept, and a threat
// on every probe.
func TestCatalogueShape(t *testing.T) {
	groups := map[string]bool{}
	for _, g := range Groups() {
		groups[g.ID] = true
	}
	seen := map[string]bool{}
	perGroup := map[string]int{}
	for _, p := range Catalogue() {
		key := p.Group + "/" + p.ID
		if seen[key] {
			t.Errorf("duplicate probe %s", key)
		}
		seen[key] = true
		perGroup[p.Group]++
		if !groups[p.Group] {
			t.Errorf("%s: group not listed", key)
		}
		if p.Threat == "" || p.Title == "" || p.Tool == nil {
			t.Errorf("%s: missing threat, title or tool path", key)
		}
	}
	// The seed's counts per group.
	want := map[string]int{"G01": 16, "G02": 15, "G03": 18, "G04": 1, "G05": 3, "G06": 13, "G07": 7, "G08": 1,
		"G09": 27, "G10": 12, "G11": 7, "G12": 4, "G13": 13, "G14": 6, "G15": 23, "G16": 15, "G17": 9, "G18": 6,
		"G19": 11, "G20": 9, "G21": 6, "G22": 3, "G30": 1}
	for g, n := range want {
		if perGroup[g] != n {
			t.Errorf("group %s has %d probes, the seed has %d", g, perGroup[g], n)
		}
	}
	for _, gap := range []string{"G04/T08", "G05/T04", "G05/T05", "G06/T15", "G07/T08", "G18/T09", "G22/T04"} {
		if !seen[gap] {
			t.Errorf("seed id %s is missing", gap)
		}
	}
	if perGroup["G40"] < 15 {
		t.Errorf("G40 has %d probes, want one per design claim", perGroup["G40"])
	}
}

// TestNoProbeTargetsARealName: every name a shell command or request names
// is reserved, so nothing can resolve to the world.
func TestNoProbeTargetsARealName(t *testing.T) {
	for _, p := range Catalogue() {
		cmds := []string{p.Shell}
		for _, a := range p.Alternates {
			cmds = append(cmds, a.Command)
		}
		for _, c := range cmds {
			for _, f := range strings.Fields(c) {
				if i := strings.Index(f, "://"); i >= 0 {
					host := strings.SplitN(strings.SplitN(f[i+3:], "/", 2)[0], ":", 2)[0]
					if !reservedName(host) && host != "127.0.0.1" {
						t.Errorf("%s/%s: shell command names %q", p.Group, p.ID, host)
					}
				}
			}
		}
	}
}
