package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/spf13/cobra"
)

// specOptions are the flags shared by `spec check` and `spec resolve`.
type specOptions struct {
	path string // --spec; empty selects the embedded default
	out  string // --out (resolve)
	json bool   // --json: machine-readable output
}

func newSpecCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "spec",
		Short: "Validate a sandbox spec and show everything it resolves into",
		Long: `A sandbox spec (sandbox_spec.toml) says what the sandbox may do:

  schema_version = 1
  capabilities = ["network", "mcp_client", "openai_agents"]
  allowed_domains = [".example.com"]      # .x = x and its subdomains; x = x only
  allowed_ip_addresses = []               # addresses or CIDRs, canonical spelling
  credentials_in_sandbox = false          # true: a softening, the real keys go into the sandbox
  [[environment_variables]]
  name = "MY_VAR"                         # exactly one of value = "..." or from_host = true
  value = "literal"
  [[credentials]]                         # held by the gateway; the agent gets a placeholder
  host = "api.example.com"                # the one host it is sent to (must be allowed)
  header = "Authorization"
  format = "Bearer {value}"               # {value} exactly once
  from_host = "EXAMPLE_TOKEN"             # the host variable holding it

Capabilities: network (the egress gateway), mcp_client (the MCP sidecar; needs
network), openai_agents (adds .openai.com and OpenAI's credential, OPENAI_API_KEY,
held by the gateway; needs network), shell_access (lets the agent start processes).
Without FILE or --spec, ./sandbox_spec.toml is used when present, else the built-in default;
every command says which one it loaded. run, doctor, test-sandbox and mcp pin refuse
(exit 6) a ./sandbox_spec.toml they found themselves that softens the sandbox beyond
the built-in default until you trust its exact content: see spec trust --help.`,
	}
	cmd.AddCommand(newSpecCheckCmd(s), newSpecResolveCmd(s), newSpecDefaultCmd(s), newSpecTrustCmd(s), newSpecUntrustCmd(s))
	return cmd
}

func newSpecDefaultCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "default",
		Short: "Print the built-in spec, a starting point for your own sandbox_spec.toml",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := s.Out.Write(spec.DefaultTOML())
			return err
		},
	}
}

func newSpecCheckCmd(s Streams) *cobra.Command {
	var o specOptions
	cmd := &cobra.Command{
		Use:   "check [FILE]",
		Short: "Validate a spec; list every problem as file:line:col: key: message (exit 3)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := o.takeFileArg(args); err != nil {
				return err
			}
			if o.json {
				return specCheckJSON(s, o)
			}
			return specCheck(s, o)
		},
	}
	cmd.Flags().StringVar(&o.path, "spec", "", specFlagHelp)
	cmd.Flags().BoolVar(&o.json, "json", false, `print {"ok": bool, "problems": [...]} instead of text`)
	return cmd
}

func newSpecResolveCmd(s Streams) *cobra.Command {
	var o specOptions
	cmd := &cobra.Command{
		Use:   "resolve [FILE]",
		Short: "Show (or write with --out) everything a spec resolves into",
		Long: `Resolve a spec into the profile every layer enforces. With --out DIR it writes
sandbox-spec.json, resolved-profile.json, seccomp-profile.json,
landlock-policy.json, gateway-policy.json, squid.conf, Dockerfile and
softening-ledger.json into DIR (created if missing; existing links are refused).
With --json it prints resolved-profile.json; otherwise a summary.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := o.takeFileArg(args); err != nil {
				return err
			}
			return specResolve(s, o)
		},
	}
	cmd.Flags().StringVar(&o.path, "spec", "", specFlagHelp)
	cmd.Flags().StringVar(&o.out, "out", "", "directory to write the resolved artifacts to")
	cmd.Flags().BoolVar(&o.json, "json", false, "print resolved-profile.json instead of a summary")
	return cmd
}

// takeFileArg folds the optional FILE argument into o.path; naming two
// different files, one by argument and one by --spec, is a usage error.
func (o *specOptions) takeFileArg(args []string) error {
	if len(args) == 0 {
		return nil
	}
	if o.path != "" && o.path != args[0] {
		return usageErrorf("two specs named: %s and --spec %s; name one", args[0], o.path)
	}
	o.path = args[0]
	return nil
}

// specFlagHelp is the help of every --spec flag.
const specFlagHelp = "spec file (default: ./" + workdirSpec + " when present, else the built-in spec)"

// workdirSpec is the spec file looked for in the working directory when
// --spec is not given, as compose-style tools look for their file.
const workdirSpec = "sandbox_spec.toml"

// builtinSpecName is how messages name the embedded default spec.
const builtinSpecName = "built-in default"

// chooseSpec returns the spec file to load: flag when given, else
// ./sandbox_spec.toml when it exists, else "" for the built-in default.
func chooseSpec(flag string) (string, error) {
	path := flag
	if path == "" {
		path = workdirSpec
	}
	fi, err := os.Stat(path)
	switch {
	case flag == "" && errors.Is(err, os.ErrNotExist):
		return "", nil
	case err == nil && !fi.Mode().IsRegular():
		return "", &spec.Problems{List: []spec.Problem{{File: path, Message: "not a regular file (want a sandbox_spec.toml)"}}}
	}
	return path, nil // any other error is reported by spec.LoadFile
}

// loadSpec loads the spec chosen by chooseSpec and returns it with the
// name messages use for it (its path, or "built-in default").
func loadSpec(flag string) (*spec.Spec, string, error) {
	path, err := chooseSpec(flag)
	if err != nil {
		return nil, "", err
	}
	if path == "" {
		sp, err := spec.Default()
		return sp, builtinSpecName, err
	}
	sp, err := spec.LoadFile(path)
	return sp, path, err
}

// loadProfile loads and resolves the selected spec; name is the spec's
// name for messages.
func loadProfile(flag string) (p *spec.Profile, name string, err error) {
	sp, name, err := loadSpec(flag)
	if err != nil {
		return nil, name, err
	}
	p, err = spec.Resolve(sp)
	return p, name, err
}

// invalidSpec maps a load or resolve error to exit 3, printing every
// problem to stderr when print is set.
func invalidSpec(s Streams, err error, print bool) error {
	var probs *spec.Problems
	if !errors.As(err, &probs) {
		return withCode(ExitInvalidSpec, fmt.Errorf("resolving spec: %w", err))
	}
	if print {
		fmt.Fprintln(s.Err, probs.Error())
	}
	return withCode(ExitInvalidSpec, fmt.Errorf("invalid spec: %d problem(s)", len(probs.List)))
}

func specCheck(s Streams, o specOptions) error {
	p, name, err := loadProfile(o.path)
	if err != nil {
		return invalidSpec(s, err, true)
	}
	for _, w := range p.Spec.Warnings {
		fmt.Fprintf(s.Err, "warning: %s\n", w.String())
	}
	if name != builtinSpecName {
		noteTrust(s.Err, p, name) // spec_gate.go
	}
	_, err = fmt.Fprintf(s.Out, "%s: ok (capabilities: %s; containers: %s)\n",
		name, orNone(p.Capabilities), strings.Join(p.Roles, ", "))
	return err
}

// checkSchema names the shape of `spec check --json`'s document.
const checkSchema = "mcpsidecar.spec-check/v1"

// checkResult is the output of `spec check --json`.
type checkResult struct {
	Schema   string         `json:"schema"`
	Spec     string         `json:"spec"`
	OK       bool           `json:"ok"`
	Problems []spec.Problem `json:"problems"`
	Warnings []spec.Problem `json:"warnings"`
}

// specCheckJSON reports the verdict on stdout as JSON; the exit code is
// the same as without --json.
func specCheckJSON(s Streams, o specOptions) error {
	p, name, err := loadProfile(o.path)
	res := checkResult{Schema: checkSchema, Spec: name, OK: err == nil, Problems: []spec.Problem{}, Warnings: []spec.Problem{}}
	if p != nil {
		res.Warnings = append(res.Warnings, p.Spec.Warnings...)
	}
	var probs *spec.Problems
	if errors.As(err, &probs) {
		res.Problems = probs.List
	}
	b, merr := json.MarshalIndent(res, "", "  ")
	if merr != nil {
		return fmt.Errorf("encoding check result: %w", merr)
	}
	if _, werr := fmt.Fprintf(s.Out, "%s\n", b); werr != nil {
		return werr
	}
	if err != nil {
		return invalidSpec(s, err, false)
	}
	return nil
}

func specResolve(s Streams, o specOptions) error {
	p, name, err := loadProfile(o.path)
	if err != nil {
		return invalidSpec(s, err, true)
	}
	files, err := spec.Artifacts(p)
	if err != nil {
		return err
	}
	if o.out != "" {
		if err := writeArtifacts(o.out, files); err != nil {
			return err
		}
	}
	if o.json {
		_, err = s.Out.Write(files[spec.FileProfile])
		return err
	}
	return printSummary(s.Out, p, name, o.out, files)
}

func printSummary(w io.Writer, p *spec.Profile, name, out string, files map[string][]byte) error {
	var b strings.Builder
	fmt.Fprintf(&b, "spec:         %s (hash %s)\n", name, p.SpecHash)
	fmt.Fprintf(&b, "capabilities: %s\n", orNone(p.Capabilities))
	fmt.Fprintf(&b, "containers:   %s\n", strings.Join(p.Roles, ", "))
	if p.Gateway != nil {
		fmt.Fprintf(&b, "egress:       domains %s; IPs %s\n", orNone(p.Gateway.AllowedDomains), orNone(p.Gateway.AllowedIPs))
	} else {
		b.WriteString("egress:       none (no network capability)\n")
	}
	if len(p.Credentials) > 0 {
		b.WriteString("credentials:\n")
		for _, c := range p.Credentials {
			fmt.Fprintf(&b, "  %-22s %-10s %s\n", c.FromHost, c.Lives, c.Why)
		}
	}
	b.WriteString("softening ledger:\n")
	for _, l := range p.Ledger {
		fmt.Fprintf(&b, "  %-22s %-10s %s\n", l.Capability, l.Layer, l.What)
	}
	if out != "" {
		fmt.Fprintf(&b, "wrote to %s: %s\n", out, strings.Join(slices.Sorted(maps.Keys(files)), ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// writeArtifacts writes files into dir, creating dir if needed. It never
// follows a symbolic link: dir itself must not be one, and an existing
// link in place of a file is refused rather than written through (the
// threat: a link planted to redirect the write onto another file).
func writeArtifacts(dir string, files map[string][]byte) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("checking %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("writing to %s: not a directory (links are not followed)", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dir, err)
	}
	defer root.Close()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := writeNoFollow(root, name, files[name]); err != nil {
			return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
		}
	}
	return nil
}

func writeNoFollow(root *os.Root, name string, data []byte) error {
	if fi, err := root.Lstat(name); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("refusing to replace a %s", fi.Mode().Type())
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|runs.NoFollow, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
