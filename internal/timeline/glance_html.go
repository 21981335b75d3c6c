package timeline

import (
	"fmt"
	"strings"
)

// The views of the summary at the top of report.html.

// hardView is one container's row of the hardening table. A cell marked
// Seen holds what the host read of the process from outside; the others
// are the role's own report or the configuration the harness asked for.
type hardView struct {
	Role                          string
	Landlock, LandlockNote        string
	Seccomp, SeccompNote          string
	Caps, NoNewPrivs, ROot, User  string
	SeccompSeen, CapsSeen         bool
	NNPSeen, UserSeen             bool
	BadLandlock, BadSeccomp       bool
	BadCaps, BadNNP, BadRO, BadUs bool
	Notes                         []string
}

// softGroup is the ledger's entries for one capability.
type softGroup struct {
	Capability string
	Items      []Softening
}

// probeGroupView is one line of the per-group probe summary.
type probeGroupView struct {
	ID, Title, Anchor      string
	Pass, Violation, Other int
}

// seccompLayers are the harden layers that are seccomp filters, with the
// words the report shows for them.
var seccompLayers = []struct{ name, text string }{
	{"syscall-deny", "syscall deny-list"},
	{"no-spawn", "no exec"},
	{"no-unix", "no unix sockets"},
	{"no-listen", "no listen"},
	{"no-udp", "no UDP"},
	{"no-netlink", "no netlink"},
}

func hardViewOf(h ContainerHardening) hardView {
	v := hardView{Role: h.Role, Landlock: "not reported", Seccomp: "not reported", Caps: "not recorded",
		NoNewPrivs: "not recorded", ROot: "not recorded", User: "not recorded"}
	layers := map[string]HardeningLayer{}
	if r := h.Report; r != nil {
		for _, l := range r.Layers {
			layers[l.Name] = l
		}
		v.Landlock, v.LandlockNote, v.BadLandlock = landlockText(r, layers)
		if r.Error != "" {
			v.Notes = append(v.Notes, "report: "+r.Error)
		}
		v.Notes = append(v.Notes, r.Degradations...)
		var on, off []string
		for _, s := range seccompLayers {
			l, ok := layers[s.name]
			switch {
			case !ok:
			case l.Enforced:
				on = append(on, s.text)
			case l.Required:
				off = append(off, s.text+" (required!)")
				v.BadSeccomp = true
			default:
				off = append(off, s.text)
			}
		}
		if len(on) > 0 {
			v.Seccomp = strings.Join(on, ", ")
		} else {
			v.Seccomp, v.BadSeccomp = "no filter reported", true
		}
		if len(off) > 0 {
			v.SeccompNote = "not applied: " + strings.Join(off, ", ")
		}
	}
	if o := h.Observed; o != nil && o.Seen {
		mode := map[int]string{0: "off", 1: "strict", 2: "filter"}[o.Seccomp]
		if mode == "" {
			mode = fmt.Sprint(o.Seccomp)
		}
		seen := fmt.Sprintf("mode %s, %s", mode, plural(o.SeccompFilters, "filter"))
		if v.Seccomp == "not reported" {
			v.Seccomp = seen
		} else {
			v.Seccomp = seen + ": " + v.Seccomp
		}
		v.SeccompSeen = true
		v.BadSeccomp = v.BadSeccomp || o.Seccomp != 2
		v.Caps, v.CapsSeen = capsText(o.CapEff), true
		v.BadCaps = strings.Trim(o.CapEff, "0") != ""
		v.NoNewPrivs, v.NNPSeen, v.BadNNP = yesNo(o.NoNewPrivs), true, !o.NoNewPrivs
		v.User, v.UserSeen, v.BadUs = fmt.Sprintf("uid %d", o.UID), true, o.UID == 0
		if o.UID == 0 {
			v.User = "uid 0 (root)"
		}
	} else if o != nil && o.Detail != "" {
		v.Notes = append(v.Notes, "not seen from outside: "+o.Detail)
	}
	if c := h.Config; c != nil {
		v.ROot, v.BadRO = yesNo(c.ReadOnlyRootFS), !c.ReadOnlyRootFS
		if !v.CapsSeen {
			v.Caps = capsConfigText(c)
			v.BadCaps = len(c.CapAdd) > 0 || !contains(c.CapDrop, "ALL")
		}
		if !v.NNPSeen {
			nnp := contains(c.SecurityOpt, "no-new-privileges:true") || contains(c.SecurityOpt, "no-new-privileges")
			v.NoNewPrivs, v.BadNNP = yesNo(nnp), !nnp
		}
		if !v.UserSeen && c.User != "" {
			v.User = c.User
			v.BadUs = c.User == "0" || strings.HasPrefix(c.User, "0:") || c.User == "root"
		}
	}
	return v
}

func landlockText(r *RoleReport, layers map[string]HardeningLayer) (text, note string, bad bool) {
	if r.ABI == 0 {
		return fmt.Sprintf("not enforced (kernel ABI %d)", r.KernelABI), "", true
	}
	text = fmt.Sprintf("ABI %d", r.ABI)
	if r.KernelABI != 0 && r.KernelABI != r.ABI {
		text += fmt.Sprintf(" (kernel %d)", r.KernelABI)
	}
	var parts []string
	if l, ok := layers["landlock-fs"]; ok {
		if l.Enforced {
			parts = append(parts, "files")
		} else {
			bad = bad || l.Required
			note = "files NOT restricted"
		}
	}
	if l, ok := layers["landlock-net"]; ok {
		if l.Enforced {
			parts = append(parts, "TCP")
			note = l.Detail
		} else {
			bad = bad || l.Required
			note = "TCP not restricted by Landlock"
			if l.Detail != "" {
				note += " (" + l.Detail + ")"
			}
		}
	}
	if len(parts) > 0 {
		text += ": " + strings.Join(parts, " + ")
	}
	return text, note, bad
}

func capsText(capEff string) string {
	if strings.Trim(capEff, "0") == "" {
		return "none (CapEff 0)"
	}
	return "CapEff " + capEff
}

func capsConfigText(c *ContainerConfig) string {
	s := "drop " + orDash(strings.Join(c.CapDrop, ","))
	if len(c.CapAdd) > 0 {
		s += ", add " + strings.Join(c.CapAdd, ",")
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func softGroups(l []Softening) []softGroup {
	var out []softGroup
	at := map[string]int{}
	for _, s := range l {
		i, ok := at[s.Capability]
		if !ok {
			i = len(out)
			at[s.Capability] = i
			out = append(out, softGroup{Capability: s.Capability})
		}
		out[i].Items = append(out[i].Items, s)
	}
	return out
}

func probeGroupViews(r *ProbeReport) []probeGroupView {
	var out []probeGroupView
	for i, g := range r.Groups {
		v := probeGroupView{ID: g.ID, Title: g.Title, Anchor: fmt.Sprintf("group-%d", i+1)}
		for _, p := range g.Probes {
			switch p.Class() {
			case ClassPass:
				v.Pass++
			case ClassViolation:
				v.Violation++
			default:
				v.Other++
			}
		}
		out = append(out, v)
	}
	return out
}
