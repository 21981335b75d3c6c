// Package inside is what our binary does inside a run's containers for
// the host, when the host works through the engine's API alone (issue 29;
// docs/engine-only.md): short-lived helper containers that join one
// role's namespace and nothing else. It names their hidden commands and
// does their work: remove the default routes of a network namespace
// (old engines), read the kernel's status of a role's process from its
// pid namespace, wait until a role answers on its own loopback. It
// imports no engine client; the host side (package sandbox) runs the
// helpers through dockerx.
package inside

// Hidden commands of our binary that the helpers run.
const (
	// DropRouteCommand removes the default routes of the network
	// namespace it runs in ([DropDefaultRoutes]).
	DropRouteCommand = "net-drop-default-route"
	// ReadyCommand waits until a role answers on its own loopback
	// ([AwaitReady]).
	ReadyCommand = "await-ready"
)

// ObserveCommand is our binary's hidden command that reads, from a helper
// container sharing only a role container's pid namespace
// (--pid container:<id>), the kernel's account of the role's main
// process ([ObserveRole]): how the host observes a role's hardening
// through the engine alone, with no /proc of this host.
const ObserveCommand = "observe-role"
