package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/follow"
	"github.com/mcpsidecar/mcpsidecar/internal/redact"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

// tailOptions are runs tail's flags.
type tailOptions struct {
	dir      string
	ref      string
	json     bool
	follow   bool
	interval time.Duration
}

func newRunsTailCmd(s Streams, dir *string) *cobra.Command {
	o := tailOptions{}
	cmd := &cobra.Command{
		Use:   "tail [RUN]",
		Short: "Print a run's decisions and tool calls as they happen (the running run by default), denials with the spec line that would allow them",
		Long: `tail prints a run's record one event a line: each egress decision of the gateway,
each tool call and resource read of the sidecar, each model request of the agent.
A denial says what was refused, why, what caused it, and the spec line that would
allow it (the run's own allowed_domains or allowed_ip_addresses with the entry
added), or why no line would.

Without RUN, the run in progress (the newest run directory whose harness has not
written its end yet); when none is, the latest run. RUN is a run id, a unique prefix
of one, or a run directory path.

A run in progress is read from what its roles append to their logs while it goes;
--follow keeps reading, like tail -f, and ends when the run ends (its harness wrote
timeline.jsonl), with a last line that gives the exit code and verdict. Without
--follow, what is there now is printed. A finished run: its whole joined record, then
its end.

--json prints one JSON object a line, the schema mcpsidecar.tail/v1
(docs/reading-a-run.md): {"type": "event"|"problem"|"end", "event": a timeline.jsonl
event, "fix": {"spec_line", "note"} for a denial, ...}.

Examples:
  mcpsidecar runs tail -f                    # the run in progress, until it ends
  mcpsidecar runs tail -f --json | jq 'select(.event.decision=="deny")'
  mcpsidecar runs tail run-2026-12-07-00-41-03   # a finished run's record`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.ref = args[0]
			}
			o.dir = *dir
			return runsTail(cmd.Context(), s, o)
		},
		ValidArgsFunction: completeRunIDs(dir, 1),
	}
	f := cmd.Flags()
	f.BoolVar(&o.json, "json", false, "print one JSON object a line (schema mcpsidecar.tail/v1)")
	f.BoolVarP(&o.follow, "follow", "f", false, "keep printing what the run appends until it ends")
	f.DurationVar(&o.interval, "interval", 100*time.Millisecond, "how often a running run's logs are read")
	return cmd
}

// runsTail prints the run o names (or the running one) to s.Out.
func runsTail(ctx context.Context, s Streams, o tailOptions) error {
	if o.interval <= 0 {
		return usageErrorf("--interval %s: want a positive duration", o.interval)
	}
	path, err := tailTarget(s, o)
	if err != nil {
		return err
	}
	p := &follow.Printer{W: s.Out, JSON: o.json, RunID: runIDOf(path), Policy: follow.ReadPolicy(path)}
	if follow.Ended(path) {
		tl, err := timeline.Build(path)
		if err != nil {
			return err
		}
		p.Finished(tl)
		p.EndOf(metaOrNil(path))
		return p.Err()
	}
	p.Origins = liveOrigins(path)
	r := follow.NewRun(path, nil)
	r.Redact = hostSecrets(os.Environ())
	if !o.follow {
		r.Poll(false, p.Item)
		return p.Err()
	}
	if err := r.Follow(ctx, o.interval, p.Item); err != nil {
		if errors.Is(err, context.Canceled) {
			return p.Err() // stopped by the user, as tail -f
		}
		return err
	}
	p.EndOf(metaOrNil(path))
	return p.Err()
}

// tailTarget is the run o names; without one, the newest run that has
// not ended, else the latest (said on stderr).
func tailTarget(s Streams, o tailOptions) (string, error) {
	if o.ref != "" {
		return resolveRun(o.dir, o.ref)
	}
	all, err := runs.List(o.dir)
	if err != nil {
		return "", err
	}
	for _, r := range all {
		if !follow.Ended(r.Path) {
			return r.Path, nil
		}
	}
	path, err := resolveRun(o.dir, "")
	if err != nil {
		return "", err
	}
	fmt.Fprintf(s.Err, "no run in progress in %s: the latest, %s, ended\n", o.dir, runIDOf(path))
	return path, nil
}

func runIDOf(path string) string {
	return path[strings.LastIndexByte(path, os.PathSeparator)+1:]
}

func metaOrNil(path string) *runs.Metadata {
	m, err := runs.ReadMetadata(path)
	if err != nil {
		return nil
	}
	return m
}

// liveOrigins reads who is the sidecar from the harness's files until it
// is known (they are written as the sidecar starts).
func liveOrigins(dir string) func() timeline.Origins {
	var o timeline.Origins
	return func() timeline.Origins {
		if !o.SidecarKnown() {
			o = timeline.ReadOrigins(dir)
		}
		return o
	}
}

// hostSecrets removes from a running run's log lines the values of this
// process's secret-named variables (redact.SecretName) and URL passwords,
// marked as the harness marks those it forwards when it collects the logs
// (the run's own process has the same variables; a tail in another shell
// removes what that shell holds).
func hostSecrets(environ []string) func([]byte) []byte {
	var secrets []string
	for _, kv := range environ {
		name, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			continue
		}
		if redact.SecretName(name) {
			secrets = append(secrets, v)
		} else if pw := redact.URLPassword(v); pw != "" {
			secrets = append(secrets, pw)
		}
	}
	if len(secrets) == 0 {
		return nil
	}
	return func(b []byte) []byte { return redact.Values(b, secrets, dockerx.Redacted) }
}
