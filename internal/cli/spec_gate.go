package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/spectrust"
)

// The spec gate (issue 30). The working directory is often a repository
// someone else wrote, and a sandbox_spec.toml found there is used without
// the user naming it: one line of it can give the agent a shell, a host
// secret, or a route to the writer's server with the user's token added.
// So a spec found implicitly that softens the sandbox beyond the built-in
// default (spec.BeyondDefault) is refused before anything is created
// unless the user trusted that exact content (internal/spectrust), passes
// --trust-spec for one invocation, or sets MCPSIDECAR_TRUST_SPEC to its
// hash. A spec named with --spec is the user's choice and needs no trust.

// ExitUntrusted is the exit code of a refused spec (docs/commands.md, Exit codes).
const ExitUntrusted = exitcode.Untrusted

// envTrustSpec accepts the implicitly found spec whose sha256 it holds:
// for CI, where nobody runs `spec trust`. Only that content: never a
// switch that trusts whatever is there.
const envTrustSpec = "MCPSIDECAR_TRUST_SPEC"

// trustFlagHelp is the help of every --trust-spec flag.
const trustFlagHelp = "use ./" + workdirSpec + " for this invocation even if it softens the sandbox and is not trusted (its softenings are printed; nothing is recorded; env " + envTrustSpec + "=<its sha256> accepts only that content)"

// chosenSpec is the spec a command uses, read once: the bytes whose hash
// trust is checked against are the bytes parsed.
type chosenSpec struct {
	path     string // "": the built-in default
	implicit bool   // found in the working directory, not named by the user
	name     string // for messages: the path, or "built-in default"
	data     []byte
	spec     *spec.Spec
	profile  *spec.Profile
	err      error // reading, validating or resolving: reported where it always was
}

// input is the lifecycle's spec: the one already read and checked.
func (c chosenSpec) input() sandbox.SpecInput {
	return sandbox.SpecInput{Name: c.name, Spec: c.spec, Err: c.err}
}

// chooseAndRead selects the spec as loadSpec does (spec.go) and reads it
// once.
func chooseAndRead(flag string) chosenSpec {
	path, err := chooseSpec(flag)
	c := chosenSpec{path: path, implicit: flag == "", name: path, err: err}
	switch {
	case err != nil:
		c.name = orDefault(flag, workdirSpec)
		return c
	case path == "":
		c.name = builtinSpecName
		c.spec, c.err = spec.Default()
	default:
		if c.data, c.err = spec.ReadFile(path); c.err == nil {
			c.spec, c.err = spec.Load(path, c.data)
		}
	}
	if c.err == nil {
		c.profile, c.err = spec.Resolve(c.spec)
	}
	return c
}

// specGate are the inputs of the gate: the flags and the environment.
type specGate struct {
	flag      string // --spec
	trustFlag bool   // --trust-spec
	envHash   string // MCPSIDECAR_TRUST_SPEC
	summary   bool   // print the ledger's summary (run without --quiet)
}

// gate is the spec gate's view of run's, doctor's and test-sandbox's
// flags; the ledger's summary is run's alone (sandboxCommand.ledger).
func (o sandboxOptions) gate(getenv func(string) string) specGate {
	return specGate{flag: o.specFile, trustFlag: o.trustSpec, envHash: getenv(envTrustSpec), summary: o.ledger && !o.quiet}
}

// gateSpec reads the spec and refuses it (exit 6) when it was found in
// the working directory, softens the sandbox beyond the built-in default
// and is not trusted. An invalid spec passes: the caller reports it as
// before.
func gateSpec(w io.Writer, g specGate) (chosenSpec, error) {
	c := chooseAndRead(g.flag)
	if c.err != nil {
		return c, nil
	}
	soft, err := spec.BeyondDefault(c.profile)
	if err != nil {
		return c, err
	}
	gated := c.implicit && len(soft) > 0
	if gated {
		if err := trustImplicit(w, c, soft, g); err != nil {
			return c, err
		}
	}
	if g.summary && c.path != "" && len(c.profile.Ledger) > 0 {
		// Accepted for this invocation, the softenings were just listed.
		ledgerSummary(w, c, soft, gated && (g.trustFlag || g.envHash != ""))
	}
	return c, nil
}

// trustImplicit accepts an implicitly found, softening spec through
// --trust-spec, MCPSIDECAR_TRUST_SPEC or the trust store, and otherwise
// prints its softenings and refuses it.
func trustImplicit(w io.Writer, c chosenSpec, soft []spec.Softening, g specGate) error {
	if g.trustFlag || g.envHash != "" {
		return acceptOnce(w, c, soft, g)
	}
	check, err := storeCheck(c, soft)
	if err != nil {
		fmt.Fprintf(w, "%s softens the sandbox beyond the built-in default:\n", c.name)
		writeLedger(w, soft, nil)
		return exitcode.WithHint(ExitUntrusted, fmt.Errorf("refusing %s: cannot tell whether you trusted it: %w", c.name, err),
			"make the trust store yours alone (the error says how), then: mcpsidecar spec trust "+c.name)
	}
	switch check.Status {
	case spectrust.Trusted:
		return nil
	case spectrust.Changed:
		fmt.Fprintf(w, "%s changed since you trusted it on %s (sha256 %s then, %s now); its softenings beyond the built-in default (+ marks one the trusted version did not have):\n",
			c.name, check.Previous.Trusted.Local().Format(time.DateTime), short(check.Previous.SHA256), short(check.Hash))
		writeLedger(w, soft, check.Added)
		return untrusted(c, fmt.Errorf("refusing %s: it changed since you trusted it (%s)", c.name, addedCount(check.Added)))
	}
	fmt.Fprintf(w, "%s softens the sandbox beyond the built-in default:\n", c.name)
	writeLedger(w, soft, nil)
	return untrusted(c, fmt.Errorf("refusing %s: it was found in the working directory (not named with --spec), softens the sandbox, and you have not trusted it", c.name))
}

// acceptOnce is trust for this invocation only: --trust-spec, or
// MCPSIDECAR_TRUST_SPEC holding the content's sha256 (another hash is
// refused: it names content that is not there). Nothing is recorded; the
// softenings accepted are printed whatever --quiet says.
func acceptOnce(w io.Writer, c chosenSpec, soft []spec.Softening, g specGate) error {
	hash, env := spectrust.Hash(c.data), strings.TrimSpace(g.envHash)
	by := "--trust-spec"
	if !g.trustFlag {
		by = envTrustSpec + " (its sha256)"
	}
	if !g.trustFlag && !strings.EqualFold(env, hash) {
		fmt.Fprintf(w, "%s softens the sandbox beyond the built-in default:\n", c.name)
		writeLedger(w, soft, nil)
		return untrusted(c, fmt.Errorf("refusing %s: %s is %s, not its sha256 %s (it is not the content that was accepted)", c.name, envTrustSpec, env, hash))
	}
	fmt.Fprintf(w, "%s softens the sandbox beyond the built-in default; accepted for this invocation by %s:\n", c.name, by)
	writeLedger(w, soft, nil)
	return nil
}

// untrusted is the refusal: exit 6 and the one command that trusts c.
func untrusted(c chosenSpec, err error) error {
	return exitcode.WithHint(ExitUntrusted, err, "read the spec, then trust this exact content with: mcpsidecar spec trust "+c.name)
}

// storeCheck asks the user's trust store about c.
func storeCheck(c chosenSpec, soft []spec.Softening) (spectrust.Check, error) {
	st, abs, err := trustStore(c.path)
	if err != nil {
		return spectrust.Check{}, err
	}
	return st.Check(abs, c.data, soft)
}

// trustStore is the user's store and path's absolute form, its key there.
func trustStore(path string) (spectrust.Store, string, error) {
	dir, err := spectrust.DefaultDir()
	if err != nil {
		return spectrust.Store{}, "", err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return spectrust.Store{}, "", fmt.Errorf("finding the absolute path of %s: %w", path, err)
	}
	return spectrust.Store{Dir: dir}, abs, nil
}

func addedCount(added []spec.Softening) string {
	if len(added) == 0 {
		return "no new softening, but trust is for exact content"
	}
	return fmt.Sprintf("%d new softening(s)", len(added))
}

// short is a hash's first 12 hex digits, enough to tell two apart.
func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

// writeLedger lists softenings as `spec resolve` lists the ledger, each
// in added marked with "+".
func writeLedger(w io.Writer, soft, added []spec.Softening) {
	for _, l := range soft {
		mark := " "
		for _, a := range added {
			if a == l {
				mark = "+"
			}
		}
		fmt.Fprintf(w, "%s %-22s %-10s %s\n", mark, l.Capability, l.Layer, l.What)
	}
}

// ledgerSummary is what `run` says before it starts about a spec file
// that softens the sandbox: how many ledger entries each capability
// has, and every softening beyond the built-in default in full (unless
// listed just above).
func ledgerSummary(w io.Writer, c chosenSpec, soft []spec.Softening, listedAbove bool) {
	var order []string
	count := map[string]int{}
	for _, l := range c.profile.Ledger {
		if count[l.Capability] == 0 {
			order = append(order, l.Capability)
		}
		count[l.Capability]++
	}
	parts := make([]string, len(order))
	for i, name := range order {
		parts[i] = fmt.Sprintf("%s %d", name, count[name])
	}
	fmt.Fprintf(w, "softening ledger of %s: %s (every entry: mcpsidecar spec resolve %s)\n", c.name, strings.Join(parts, ", "), c.name)
	switch {
	case len(soft) == 0:
		fmt.Fprintln(w, "  nothing beyond the built-in default")
		return
	case listedAbove:
		fmt.Fprintf(w, "  beyond the built-in default: the %d listed above\n", len(soft))
		return
	}
	fmt.Fprintln(w, "beyond the built-in default:")
	writeLedger(w, soft, nil)
}

// noteTrust tells `spec check` that a valid spec file would still be
// refused when found in the working directory: "ok" alone hid it.
func noteTrust(w io.Writer, p *spec.Profile, name string) {
	soft, err := spec.BeyondDefault(p)
	if err != nil || len(soft) == 0 {
		return
	}
	fmt.Fprintf(w, "note: %s softens the sandbox beyond the built-in default in %d way(s); found in the working directory rather than named with --spec, it must be trusted first (mcpsidecar spec trust %s lists them)\n",
		name, len(soft), name)
}
