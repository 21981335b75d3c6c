package dockerx

import "github.com/mcpsidecar/mcpsidecar/internal/inside"

// ProcStatus is the kernel's account of a container process's
// restrictions (package inside: the same fields whether the host reads
// them or a helper in the container's pid namespace does).
type ProcStatus = inside.ProcStatus

func parseProcStatus(text string) (ProcStatus, error) { return inside.ParseStatus(text) }
