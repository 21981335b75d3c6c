package dockerx

import (
	"context"
	"errors"
	"net"
)

// Process is a container's process that [Prove] has shown to be that
// container's, on this host, and holds (a pidfd) so its number cannot name
// another process while it is used. Every host-side use of a process id
// the engine reported goes through one. Threat: the engine reports ids in
// its own pid namespace; on another host, in a VM or in a container, the
// same number names an unrelated process here, whose namespace the host
// would enter (and, on old engines, whose default route it would delete)
// and whose restrictions it would report as the sandbox's.
type Process interface {
	// Pid is the process's id on this host.
	Pid() int
	// DialInNetns connects to addr (host:port) from inside the process's
	// network namespace.
	DialInNetns(ctx context.Context, addr string) (net.Conn, error)
	// Listening reports whether a TCP socket listens on port in the
	// process's network namespace.
	Listening(port int) (bool, error)
	// DropDefaultRoutes deletes the default routes of the process's
	// network namespace.
	DropDefaultRoutes() error
	// WatchExit returns a channel closed once the process has ended;
	// closing stop ends the watch.
	WatchExit(stop <-chan struct{}) <-chan struct{}
	// RoleStatus reads /proc/<pid>/status of the container's main
	// process: this one, or docker-init's one child, proven in turn.
	RoleStatus() (ProcStatus, error)
	// Mountinfo reads the process's /proc/<pid>/mountinfo.
	Mountinfo() ([]byte, error)
	// Close releases the process; it is not used after.
	Close() error
}

// Locality is whether the engine's process ids are this host's: its API is
// a unix socket on this host whose daemon runs in this host's pid
// namespace. Decided once per engine ([Engine].Locality); only a local
// engine's ids are ever proven ([Prove]) and used.
type Locality struct {
	Local  bool
	Reason string // how it was decided, or why the engine is not local
}

// ErrNotOnThisHost wraps every failed proof: the process the engine named
// is not shown to be the container's on this host, so nothing is done to
// it and nothing read of it is the sandbox's.
var ErrNotOnThisHost = errors.New("the engine's process is not on this host")

// ErrProcessGone is a process that ended before it could be proven or read
// (the container exited meanwhile).
var ErrProcessGone = errors.New("the process has ended")
