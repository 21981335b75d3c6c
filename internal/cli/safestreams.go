package cli

import (
	"slices"

	"github.com/mcpsidecar/mcpsidecar/internal/termtext"
)

// safeStreams cleans what a host command prints (termtext): every record
// the host shows was written, in part, by the workload. A command whose
// output is a product, not a message to a person (commandSet.products:
// the agent's stdout is its answer, compared byte for byte with
// answer.txt; the other roles' are logs collected by the host), writes
// unchanged.
func safeStreams(args []string, s Streams) Streams {
	if len(args) > 0 && slices.Contains(commands().products, args[0]) {
		return s
	}
	return Streams{In: s.In, Out: termtext.NewWriter(s.Out, termtext.Colours...), Err: termtext.NewWriter(s.Err, termtext.Colours...)}
}
