//go:build linux

package probe

import (
	"context"
	"os"
)

// Groups returns the catalogue's groups in report order: the seed's G01-G22
// and G30, then G40 for mcpsidecar's own design claims and G41 for the ways
// out that issue 12 found those claims did not cover.
func Groups() []GroupInfo {
	return []GroupInfo{
		{"G01", "Runtime identity and execution context"},
		{"G02", "Basic filesystem read access"},
		{"G03", "Filesystem write and modification access"},
		{"G04", "Filesystem persistence"},
		{"G05", "Environment variables and secrets exposure"},
		{"G06", "Program and executable invocation"},
		{"G07", "Process control"},
		{"G08", "Resource limits"},
		{"G09", "Network access"},
		{"G10", "Local service and metadata access"},
		{"G11", "Inter-process communication"},
		{"G12", "User interface and desktop automation"},
		{"G13", "Browser and web session access"},
		{"G14", "Package, dependency, and supply-chain access"},
		{"G15", "Source control access"},
		{"G16", "Database and structured data access"},
		{"G17", "Cloud and external account access"},
		{"G18", "Identity, authentication, and credential stores"},
		{"G19", "System configuration and administration"},
		{"G20", "Hardware and device access"},
		{"G21", "Time, scheduling, and persistence mechanisms"},
		{"G22", "Logging, telemetry, and audit visibility"},
		{"G30", "Local AI agents"},
		{"G40", "mcpsidecar design claims"},
		{"G41", "Ways out"},
	}
}

// Catalogue returns every probe, in report order.
func Catalogue() []Probe {
	var all []Probe
	for _, part := range [][]Probe{identityProbes(), readProbes(), writeProbes(), envExecProbes(),
		processProbes(), networkProbes(), localServiceProbes(), ipcUIProbes(), browserPackageProbes(),
		sourceDatabaseProbes(), cloudIdentityProbes(), systemProbes(), hardwareTimeLogProbes(), designProbes(), waysOutProbes()} {
		all = append(all, part...)
	}
	return all
}

type toolFunc = func(context.Context, *Env) Result

// alt builds one alternate shell attempt.
func alt(family, title, command string) Alternate {
	return Alternate{Title: title, BypassClass: "alternate_command", CommandFamily: family, Command: command}
}

// fixed is a tool path that always yields r (a surface that cannot exist
// in a static Go binary in a Linux container).
func fixed(r Result) toolFunc { return func(context.Context, *Env) Result { return r } }

// ctxGoal makes a context-driven probe's goal: when the target is
// configured the probe is judged with goal g, otherwise it is unsupported.
func ctxGoal(get func(*Context) string, g Goal) func(*Context) Goal {
	return func(c *Context) Goal {
		if get(c) == "" {
			return GoalContext
		}
		return g
	}
}

// prepareFixtures creates the allowed-directory fixtures of the seed's
// bootstrap (the image has no shell to do it). Failures surface in the
// probes that read them.
func prepareFixtures(c *Context) {
	dir := c.AllowedDirectory + "/allowed"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	_ = os.WriteFile(dir+"/allowed.txt", []byte("This is a test file for the allowed directory."), 0o644)
	_ = os.WriteFile(dir+"/.hidden", []byte("This is a hidden file."), 0o644)
}
