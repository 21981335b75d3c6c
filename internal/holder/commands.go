package holder

import "strconv"

// The holder's commands: our binary's hidden commands (internal/cli),
// run in the holder container by its spec or by an exec.
const (
	// ImageBinary is our binary's path in the runtime image (the
	// ENTRYPOINT of spec.Dockerfile). An exec names its program.
	ImageBinary = "/mcpsidecar"
	// HoldCommand waits until SIGTERM: the holder's process.
	HoldCommand = "kube-hold"
	// StopCommand, run in a role's main container, sends SIGTERM to the
	// container's PID 1 (the role): Kubernetes has no call that stops one
	// container of a pod.
	StopCommand = "kube-stop"
	// ReadCommand, run in the holder, writes a tar of the named files of
	// a directory to stdout ([WriteOutput]).
	ReadCommand = "kube-read-output"
	// ReadProblem starts each line [ReadCommand] writes to stderr about a
	// named file: one it left out of the tar (a link, a FIFO, a file over
	// the cap) or one that changed while it was read.
	ReadProblem = "output file: "
)

// HolderArgs is the holder container's command.
func HolderArgs() []string { return []string{ImageBinary, HoldCommand} }

// StopArgs is the exec that stops a role's main container.
func StopArgs() []string { return []string{ImageBinary, StopCommand} }

// ReadArgs is the exec that reads names (plain file names) from dir, each
// up to limit bytes, as a tar on stdout.
func ReadArgs(dir string, limit int64, names []string) []string {
	return append([]string{ImageBinary, ReadCommand, "--dir", dir, "--max", strconv.FormatInt(limit, 10), "--"}, names...)
}
