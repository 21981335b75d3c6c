// Package cli is the command tree of mcpsidecar: it turns flags into options
// structs, calls the operation that does the work, and maps errors to exit
// codes and one-line hints. It is the only package (besides each role's one
// config function) that reads flags and the environment, and the only one
// that decides exit codes.
package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/spf13/cobra"
)

// Streams are the process's standard streams; commands write only to these.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// commandSet is a part of the command registry: the commands it builds,
// each in its own file of this package, and the names of those whose
// output is a product rather than a message to a person (safestreams.go).
type commandSet struct {
	builds   []func(Streams) *cobra.Command
	products []string
}

// commands is the command registry: every command of this build, from
// three parts that build constraints choose, none registered at init
// time. The user's commands (userCommands); the in-container roles and
// the hidden helpers the backends run in containers and pods, a Linux
// build's alone (platformCommands, roles_linux.go): the containers are
// Linux, and a host binary for Windows or macOS carries none of their
// code; the test binary's hidden commands (testCommands, testcommands.go).
func commands() commandSet {
	var all commandSet
	for _, part := range []commandSet{userCommands(), platformCommands(), testCommands()} {
		all.builds = append(all.builds, part.builds...)
		all.products = append(all.products, part.products...)
	}
	return all
}

// userCommands are what a user types. Register only commands that work.
func userCommands() commandSet {
	return commandSet{builds: []func(Streams) *cobra.Command{
		newVersionCmd,
		newSpecCmd,
		newRunCmd,
		newDoctorCmd,
		newTestSandboxCmd,
		newGCCmd,
		newRunsCmd,
		newReportCmd,
		newMCPCmd,
	}}
}

// newRootCmd builds the command tree.
func newRootCmd(s Streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "mcpsidecar",
		Short: "Run an AI agent in a hardened, disposable Docker sandbox with an MCP sidecar and an egress gateway",
		Long: `mcpsidecar runs an agent workload inside a hardened, disposable Docker sandbox,
beside an MCP server sidecar and an egress gateway, on a private per-run network,
and leaves a complete, auditable record of what happened.

The sandbox is described by sandbox_spec.toml: --spec FILE, else
./sandbox_spec.toml when present (trusted first if it softens the sandbox
beyond the built-in default), else the built-in default. Start with:

  mcpsidecar spec check            validate the spec (every problem, with file:line)
  mcpsidecar spec resolve --out d  see everything the spec turns into

Exit codes: 0 ok, 1 runtime error (also a workload timeout), 2 usage error,
3 invalid spec, 4 isolation violation found by the probe suite, 5 environment
unavailable, 6 a ./sandbox_spec.toml found here softens the sandbox and is not
trusted (mcpsidecar spec trust --help), 130 interrupted (Ctrl-C).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return withCode(ExitUsage, err)
	})
	root.Version = versionLine()
	root.SetVersionTemplate("{{.Version}}\n")
	groupCommands(root, commands().builds, s)
	completeFlagValues(root)
	root.InitDefaultCompletionCmd() // now, not at Execute, so the next line sees it
	rejectUnknownSubcommands(root)  // groups.go
	return root
}

// flagValues are the values shell completion offers for flags that take
// one of a fixed set, wherever they appear.
var flagValues = map[string][]cobra.Completion{
	"gateway-engine": {orchestrate.EngineOurs, orchestrate.EngineSquid},
}

// completeFlagValues registers completion for flag values in every
// command: the fixed sets above, *.toml files for --spec, directories for
// --runs-dir and --out.
func completeFlagValues(c *cobra.Command) {
	for name, values := range flagValues {
		if c.Flags().Lookup(name) != nil {
			_ = c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
		}
	}
	if c.Flags().Lookup("spec") != nil {
		_ = c.MarkFlagFilename("spec", "toml")
	}
	for _, name := range []string{"runs-dir", "out"} {
		if c.Flags().Lookup(name) != nil {
			_ = c.MarkFlagDirname(name)
		}
	}
	for _, sub := range c.Commands() {
		completeFlagValues(sub)
	}
}

// Command groups of --help: what a user types, apart from the roles the
// sandbox runs inside its containers.
const (
	groupUser  = "user"
	groupRoles = "roles"
)

// roleCommands are the in-container roles; a user never runs them by hand.
var roleCommands = map[string]bool{"agent": true, "gateway": true, "sidecar": true, "probe": true}

// groupCommands builds every command into root, in the user group or the
// in-container roles group.
func groupCommands(root *cobra.Command, builds []func(Streams) *cobra.Command, s Streams) {
	root.AddGroup(&cobra.Group{ID: groupUser, Title: "Commands:"},
		&cobra.Group{ID: groupRoles, Title: "In-container roles (started by the sandbox inside its containers, not by hand):"})
	root.SetHelpCommandGroupID(groupUser)
	root.SetCompletionCommandGroupID(groupUser)
	for _, build := range builds {
		c := build(s)
		c.GroupID = groupUser
		if roleCommands[c.Name()] {
			c.GroupID = groupRoles
		}
		root.AddCommand(c)
	}
}

// Run executes the command line args and returns the process exit code.
func Run(ctx context.Context, args []string, s Streams) int {
	// A role's command line is the role table's (internal/roles), as in
	// the role binary: its own flag parsing, messages and streams.
	if code, ok := runRole(ctx, args, s); ok {
		return code
	}
	s = safeStreams(args, s)
	out := &countingWriter{w: s.Out}
	s.Out = out
	root := newRootCmd(s)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	if code, ok := reportedExit(err); ok {
		return code
	}
	code, hint := codeOf(err)
	if code == ExitRuntime && isUsage(err) {
		code = ExitUsage
	}
	fmt.Fprintf(s.Err, "mcpsidecar: %v\n", err)
	if hint != "" {
		fmt.Fprintf(s.Err, "hint: %s\n", hint)
	}
	// Under --json a script reads stdout: when the command failed before
	// printing its document, it still gets one.
	if wantsJSON(cmd) && out.n == 0 {
		_ = writeJSONDoc(s.Out, errorSchema, jsonError{Error: err.Error(), ExitCode: code, Hint: hint})
	}
	return code
}

// isUsage recognises cobra's own argument errors, which it does not type.
func isUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "requires at most", "invalid argument"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
