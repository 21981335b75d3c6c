//go:build linux

package probe

import (
	"context"
)

const (
	threatHost = "Reaching the host: the host owns an address on each Docker bridge network (the gateway, the subnet's first host), " +
		"and a packet addressed to it is delivered to every host service listening on 0.0.0.0, which no route removal or forwarding filter stops."
	threatSocket = "A way out Landlock does not see: Landlock checks TCP bind and connect only, so any other socket " +
		"reaches the network unchecked; a role that needs none must not be able to create one."
)

// waysOutProbes are group G41: the ways out of the sandbox that issue 12
// found the G40 claims did not cover. Each is phrased as the attack, so
// Allowed means the way out is open. Packets go only to the host's own
// addresses on the container's networks or to the sandbox's own containers.
func waysOutProbes() []Probe {
	const g = "G41"
	return []Probe{
		{Group: g, ID: "T01", Title: "Reach the host over TCP on the ports the agent may use", Goal: GoalDeny,
			Threat: threatHost + " Connects to the host's address on each network on the gateway's and the sidecar's ports " +
				"(the ports the agent's Landlock rule allows on any address): a connection or a reset proves the host answered.",
			Tool: func(ctx context.Context, e *Env) Result { return hostTCP(ctx, e.Ctx) }},
		{Group: g, ID: "T02", Title: "Reach the host over UDP (a DNS query to port 53)", Goal: GoalDeny,
			Threat: threatHost + " Sends a DNS-shaped query (localhost, no recursion) to port 53 of the host's address on each network: " +
				"an answer or an ICMP port unreachable (ECONNREFUSED) proves the host answered.",
			Tool: func(ctx context.Context, e *Env) Result { return hostUDP(ctx, e.Ctx) }},
		{Group: g, ID: "T03", Title: "Reach the host with ICMP echo", Goal: GoalDeny,
			Threat: threatHost + " Sends one echo request to the host's address on each network (ICMP datagram socket, or raw if permitted): a reply proves the host answered.",
			Tool:   func(ctx context.Context, e *Env) Result { return hostEcho(ctx, e.Ctx) }},
		{Group: g, ID: "T04", Title: "Open a TCP connection with Fast Open past the connect rule", Goal: GoalDeny,
			Threat: "Landlock bypass (landlock-lsm/linux#41): sendto(MSG_FASTOPEN) on an unconnected TCP socket connects without connect(2), " +
				"which is what Landlock checks. Tried against a port of the sandbox's own sidecar or gateway outside the agent's policy; " +
				"setting TCP_FASTOPEN_CONNECT being accepted is also a violation.",
			Tool: func(ctx context.Context, e *Env) Result { return fastOpen(ctx, e.Ctx) }},
		{Group: g, ID: "T05", Title: "Listen without bind (an auto-bound ephemeral port)", Goal: GoalDeny,
			Threat: "A covert service: listen(2) on an unbound TCP socket binds an ephemeral port that Landlock's bind rule never sees.",
			Tool:   func(context.Context, *Env) Result { return listenUnbound() }},
		{Group: g, ID: "T06", Title: "Create and bind a UDP socket", Goal: GoalDeny,
			Threat: threatSocket + " UDP can bind and send anywhere; the agent needs no resolver (its two peers are in /etc/hosts).",
			Tool:   func(context.Context, *Env) Result { return openSockets(udpSockets) }},
		{Group: g, ID: "T07", Title: "Create an ICMP datagram socket", Goal: GoalDeny,
			Threat: threatSocket + " An unprivileged ICMP (ping) socket sends echo requests anywhere a route goes.",
			Tool:   func(context.Context, *Env) Result { return openSockets(icmpSockets) }},
		{Group: g, ID: "T08", Title: "Create a netlink route socket", Goal: GoalDeny,
			Threat: threatSocket + " NETLINK_ROUTE reads (and with privilege changes) interfaces, addresses and routes: kernel attack surface no role needs.",
			Tool:   func(context.Context, *Env) Result { return openSockets(netlinkSockets) }},
		{Group: g, ID: "T09", Title: "Create a raw IP or packet socket", Goal: GoalDeny,
			Threat: threatSocket + " Raw and packet sockets forge any packet and sniff the network.",
			Tool:   func(context.Context, *Env) Result { return openSockets(rawSockets) }},
		{Group: g, ID: "T10", Title: "Set the setuid or setgid bit on a file in the output directory", Goal: GoalDeny,
			Threat: "Planting a setuid program on the host: the output directory is collected on the host, where a setuid copy of a binary " +
				"lets any local user act as the sandbox's uid, the owner of every run's logs. Tried with chmod, fchmod, fchmodat and fchmodat2 " +
				"on a file the probe wrote, checked with stat, then removed.",
			Tool: func(_ context.Context, e *Env) Result { return setuidBits(e.Ctx.OutputDirectory) }},
		{Group: g, ID: "T11", Title: "Reach another role's output (decision log, hardening reports)", Goal: GoalDeny,
			Threat: "Forging the record: a workload that can write the gateway's decision log or another role's hardening report rewrites the proof. " +
				"Checked from inside: the output directory holds nothing of another role's, no mount (in /proc/self/mountinfo) is another role's " +
				"folder or lies under the output directory, and no visible process has another mount namespace whose root can be listed. " +
				"Writability of anything found is shown by creating and removing the probe's own temp file there. The run directory on the host is not seen from here.",
			Tool: func(_ context.Context, e *Env) Result { return otherRolesOutput(e.Ctx.OutputDirectory) }},
	}
}
