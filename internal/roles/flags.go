//go:build linux

package roles

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// flags is one command's flag set and its help.
type flags struct {
	*flag.FlagSet
	use  string // the command line, as the help's first line shows it
	long string
	out  io.Writer
}

// newFlags makes the flag set of the command use names first. The flag
// package prints nothing itself: parse returns its errors.
func newFlags(use, long string, s Streams) *flags {
	name, _, _ := strings.Cut(use, " ")
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &flags{FlagSet: fs, use: use, long: long, out: s.Out}
}

// errHelp is returned by parse after it printed the help: the command
// runs nothing and exits 0, as --help did under cobra.
var errHelp = errors.New("help printed")

// parse reads args as cobra did: flags and arguments in any order
// (--flag v and --flag=v; -flag too), "--" ends the flags. It returns the
// arguments. A flag the command lacks, or a bad value, is a usage error
// (exit 2) naming the command; -h or --help prints the help.
func (f *flags) parse(args []string) ([]string, error) {
	var rest []string
	for {
		err := f.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			f.help()
			return nil, errHelp
		}
		if err != nil {
			return nil, usageErrorf("%s: %s", f.Name(), flagError(err))
		}
		left := f.Args()
		if len(left) == 0 {
			return rest, nil
		}
		if used := len(args) - len(left); used > 0 && args[used-1] == "--" {
			return append(rest, left...), nil
		}
		rest, args = append(rest, left[0]), left[1:]
	}
}

// flagError is the flag package's error in cobra's words for a flag the
// command lacks ("unknown flag: --x"); its own words otherwise (a bad
// value names the flag and the value).
func flagError(err error) string {
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
		return "unknown flag: --" + name
	}
	return err.Error()
}

// noArgs parses args for a command that takes no argument.
func (f *flags) noArgs(args []string) error {
	rest, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageErrorf("unknown command %q for %q", rest[0], "mcpsidecar "+f.Name())
	}
	return nil
}

// help prints the command's help on stdout.
func (f *flags) help() {
	fmt.Fprintf(f.out, "Usage: mcpsidecar %s\n", f.use)
	if f.long != "" {
		fmt.Fprintf(f.out, "\n%s\n", f.long)
	}
	var has bool
	f.VisitAll(func(*flag.Flag) { has = true })
	if has {
		fmt.Fprint(f.out, "\nFlags:\n")
		f.SetOutput(f.out)
		f.PrintDefaults()
		f.SetOutput(io.Discard)
	}
}

// stringList is a flag that may be repeated, each value kept.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}
