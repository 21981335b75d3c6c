package timeline

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

// glanceText writes the summary at the top of report.html as text: what a
// reviewer reads first, one fact a line, for a golden file.
func glanceText(t *Timeline) string {
	var b strings.Builder
	v := t.view()
	fmt.Fprintf(&b, "verdict [%s] %s\n", v.Headline.Class, v.Headline.Sentence)
	fmt.Fprintf(&b, "question (recorded %v): %s\n", v.QuestionRecorded, v.Question)
	fmt.Fprintf(&b, "denials: %d unexpected, %d expected\n", v.Denials.UnexpectedCount(), v.Denials.ExpectedCount())
	for _, d := range v.Denials.Unexpected {
		fmt.Fprintf(&b, "  unexpected %s x%d: %s\n", d.Target, d.Count, d.Reason)
	}
	for _, d := range v.Denials.Expected {
		fmt.Fprintf(&b, "  expected %s x%d: %s\n", d.Target, d.Count, d.Why)
	}
	for _, h := range v.Hardening {
		fmt.Fprintf(&b, "hardening %s: landlock %q %q bad=%v | seccomp %q %q seen=%v bad=%v | caps %q seen=%v bad=%v | nnp %q bad=%v | ro %q bad=%v | user %q seen=%v bad=%v | notes %q\n",
			h.Role, h.Landlock, h.LandlockNote, h.BadLandlock, h.Seccomp, h.SeccompNote, h.SeccompSeen, h.BadSeccomp,
			h.Caps, h.CapsSeen, h.BadCaps, h.NoNewPrivs, h.BadNNP, h.ROot, h.BadRO, h.User, h.UserSeen, h.BadUs, h.Notes)
	}
	for _, g := range v.Softenings {
		for _, s := range g.Items {
			fmt.Fprintf(&b, "softening %s/%s: %s\n", g.Capability, s.Layer, s.What)
		}
	}
	for _, g := range v.ProbeGroups {
		fmt.Fprintf(&b, "probe group %s %q: %d pass, %d violation, %d other\n", g.ID, g.Title, g.Pass, g.Violation, g.Other)
	}
	if v.ProbeFilter != "" {
		fmt.Fprintf(&b, "probe filter opens on: %s\n", v.ProbeFilter)
	}
	fmt.Fprintf(&b, "verdict checks: %d passed, open=%v\n", v.ChecksPassed, v.ChecksOpen)
	return b.String()
}

func TestGoldenGlance(t *testing.T) {
	for _, name := range runDirs {
		t.Run(name, func(t *testing.T) {
			tl, err := Build(filepath.Join("testdata", "runs", name))
			if err != nil {
				t.Fatal(err)
			}
			testutil.Golden(t, filepath.Join("testdata", "golden", name+".glance.txt"), []byte(glanceText(tl)))
		})
	}
}

// TestHeadlineNamesTheCause pins the one sentence for each kind of run:
// the reviewer reads the reason, not only a red badge.
func TestHeadlineNamesTheCause(t *testing.T) {
	for run, want := range map[string]string{
		"unreachable": "The model endpoint was unreachable: the gateway refused api.example.com:443: host api.example.com is not in allowed_domains.",
		"crash":       "The agent container ran out of memory and was killed (exit 137, peak 512.0MiB).",
		"doctor":      "The sandbox works end to end: all 12 checks passed.",
		"testsandbox": "No isolation violation: 47 probes ran from inside the sandbox, 40 passed and 7 could not be tested here (unsupported).",
		"empty":       "No verdict: run-metadata.json is missing or unreadable, so this directory does not say how the run ended.",
	} {
		tl, err := Build(filepath.Join("testdata", "runs", run))
		if err != nil {
			t.Fatal(err)
		}
		if got := tl.Headline().Sentence; got != want {
			t.Errorf("%s:\n got %q\nwant %q", run, got, want)
		}
		var page bytes.Buffer
		if err := tl.WriteHTML(&page); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(page.String(), `id="verdict-sentence"`) {
			t.Errorf("%s: the page has no verdict sentence", run)
		}
	}
}

// TestExpectedDenials: doctor's own .invalid check and test-sandbox's
// probes are expected; in a run with the agent no denial is, even of a
// .invalid name.
func TestExpectedDenials(t *testing.T) {
	deny := Event{Kind: KindEgress, Decision: "deny", Method: "GET", Host: "probe.invalid", Port: "80"}
	other := Event{Kind: KindEgress, Decision: "deny", Method: "CONNECT", Host: "exfil.example", Port: "443"}
	allow := Event{Kind: KindEgress, Decision: "allow", Host: "probe.invalid"}
	for _, tt := range []struct {
		command string
		e       Event
		want    bool
	}{
		{"doctor", deny, true}, {"doctor", other, false}, {"doctor", allow, false},
		{"doctor", Event{Kind: KindEgress, Decision: "deny", Method: "POST", Host: "api.openai.com", Port: "443", Credential: "refused"}, true},
		{"doctor", Event{Kind: KindEgress, Decision: "deny", Method: "POST", Host: "api.openai.com", Port: "443", Credential: "refused", ResolvedIP: "192.0.2.1"}, false},
		{"run", Event{Kind: KindEgress, Decision: "deny", Method: "POST", Host: "api.openai.com", Port: "443", Credential: "refused"}, false},
		{"test-sandbox", other, true}, {"run", deny, false}, {"run", other, false}, {"", deny, false},
	} {
		tl := &Timeline{Command: tt.command}
		if got, why := tl.ExpectedDenial(&tt.e); got != tt.want || (got && why == "") {
			t.Errorf("%s %s: expected %v (%q), want %v", tt.command, tt.e.Host, got, why, tt.want)
		}
	}
}

// TestHardeningCellsFlagWeakness: a container whose kernel account shows
// capabilities, root, no seccomp filter or no no_new_privs, or whose
// configuration leaves the root writable, is marked in its cell.
func TestHardeningCellsFlagWeakness(t *testing.T) {
	v := hardViewOf(ContainerHardening{Role: "agent",
		Report:   &RoleReport{ABI: 0, KernelABI: 0, Layers: []HardeningLayer{{Name: "no-spawn", Required: true}}},
		Observed: &Observation{Seen: true, Seccomp: 0, CapEff: "00000000a80425fb", UID: 0},
		Config:   &ContainerConfig{User: "0:0", ReadOnlyRootFS: false, CapDrop: []string{"NET_RAW"}}})
	if !v.BadLandlock || !v.BadSeccomp || !v.BadCaps || !v.BadNNP || !v.BadRO || !v.BadUs {
		t.Errorf("weak container not flagged in every cell: %+v", v)
	}
	if v.User != "uid 0 (root)" || v.Caps != "CapEff 00000000a80425fb" || !strings.Contains(v.SeccompNote, "no exec (required!)") {
		t.Errorf("cells %+v", v)
	}
	// Without the host's account, the configuration is shown and judged.
	v = hardViewOf(ContainerHardening{Role: "gateway", Config: &ContainerConfig{User: "65532:65532", ReadOnlyRootFS: true,
		CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges:true"}}})
	if v.BadCaps || v.BadNNP || v.BadRO || v.BadUs || v.CapsSeen || v.User != "65532:65532" || v.Caps != "drop ALL" {
		t.Errorf("config-only cells %+v", v)
	}
}
