//go:build linux

package roles

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/termtext"
)

// Streams are the process's standard streams; commands write only to these.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// Command is one command of the table.
type Command struct {
	Name  string // what args[0] names
	Short string // one line, for the host binary's help
	// Listed commands are the in-container roles the host binary's help
	// lists; the others are hidden helpers.
	Listed bool
	// Product commands write output the host collects (the agent's answer,
	// the roles' logs, a tar, JSON for the host): written unchanged. A
	// message to a person is cleaned of terminal controls (termtext).
	Product bool
	run     func(ctx context.Context, args []string, s Streams) error
}

// Commands is the table, in the order the host binary's help lists them.
func Commands() []Command {
	return slices.Clone(table)
}

// Lookup returns the command named name.
func Lookup(name string) (Command, bool) {
	i := slices.IndexFunc(table, func(c Command) bool { return c.Name == name })
	if i < 0 {
		return Command{}, false
	}
	return table[i], true
}

// Run runs the command args[0] with the rest of args and returns the
// process exit code. An error is printed as the host binary printed it,
// "mcpsidecar: <error>", then "hint: <hint>" when it has one.
func Run(ctx context.Context, args []string, s Streams) int {
	if len(args) == 0 {
		fmt.Fprintf(s.Err, "mcpsidecar: no command; this binary runs the sandbox's roles: %s\n", names())
		return exitcode.Usage
	}
	c, ok := Lookup(args[0])
	if !ok {
		fmt.Fprintf(s.Err, "mcpsidecar: unknown command %q; this binary runs only the sandbox's roles (%s); the host commands are the mcpsidecar binary's\n", args[0], names())
		return exitcode.Usage
	}
	if !c.Product {
		s = Streams{In: s.In, Out: termtext.NewWriter(s.Out, termtext.Colours...), Err: termtext.NewWriter(s.Err, termtext.Colours...)}
	}
	err := c.run(ctx, args[1:], s)
	if errors.Is(err, errHelp) {
		return exitOK
	}
	code, hint := exitcode.Of(err)
	if err != nil {
		fmt.Fprintf(s.Err, "mcpsidecar: %v\n", err)
		if hint != "" {
			fmt.Fprintf(s.Err, "hint: %s\n", hint)
		}
	}
	return code
}

// names lists the table's command names.
func names() string {
	var n []string
	for _, c := range table {
		n = append(n, c.Name)
	}
	return strings.Join(n, ", ")
}
