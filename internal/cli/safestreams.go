package cli

import "github.com/mcpsidecar/mcpsidecar/internal/termtext"

// inContainer are the commands whose output is a product, not a message to
// a person: the agent's stdout is its answer (compared byte for byte with
// answer.txt), the others are logs collected by the host.
var inContainer = map[string]bool{"agent": true, "gateway": true, "sidecar": true, "probe": true}

// safeStreams cleans what a host command prints (termtext): every record
// the host shows was written, in part, by the workload.
func safeStreams(args []string, s Streams) Streams {
	if len(args) > 0 && inContainer[args[0]] {
		return s
	}
	return Streams{In: s.In, Out: termtext.NewWriter(s.Out, termtext.Colours...), Err: termtext.NewWriter(s.Err, termtext.Colours...)}
}
