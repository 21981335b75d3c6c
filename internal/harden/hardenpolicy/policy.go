// Package hardenpolicy is a role's hardening policy as data: the
// [Policy] the spec compiler writes (landlock-policy.json holds one per
// role), the environment variable that carries it into the container,
// its layer names, and its strict decoding and validation. The hardening
// role (internal/harden) owns it and re-exports every name; it lives in
// this leaf so that the host (the spec compiler, the planner) can name a
// policy without importing the code that installs one (Landlock, seccomp
// filters). It imports only the standard library.
package hardenpolicy

// Schema is the value of [Policy.Schema] this package understands.
const Schema = "mcpsidecar.harden/v1"

// Layer names, as used in [Policy.BestEffort] and in error messages.
const (
	LayerLandlockFS  = "landlock-fs"  // Landlock filesystem rules
	LayerLandlockNet = "landlock-net" // Landlock TCP connect/bind rules (ABI >= 4)
	LayerNoSpawn     = "no-spawn"     // seccomp filter refusing execve/execveat
	LayerNoUnix      = "no-unix"      // seccomp filter refusing AF_UNIX sockets
	// LayerSyscallDeny is the seccomp filter's baseline: ptrace, namespaces,
	// mount, keyrings, io_uring, bpf and friends, refused even when the
	// container runs without Docker's seccomp profile.
	LayerSyscallDeny = "syscall-deny"
	LayerNoListen    = "no-listen"  // seccomp filter refusing listen(2)
	LayerNoUDP       = "no-udp"     // seccomp filter refusing datagram sockets (UDP, ICMP)
	LayerNoNetlink   = "no-netlink" // seccomp filter refusing AF_NETLINK sockets
)

// Policy is what one role (agent, sidecar, gateway, probe) locks itself down
// to. The spec compiler writes it (landlock-policy.json holds one per role);
// the harness hands it to the container in the MCPSIDECAR_HARDEN_POLICY
// environment variable as JSON.
type Policy struct {
	Schema string `json:"schema"`
	Role   string `json:"role"`

	Landlock Landlock `json:"landlock"`

	// NoSpawn refuses execve and execveat once the role has started,
	// unless the spec grants shell_access.
	NoSpawn bool `json:"no_spawn"`
	// DenyUnixSockets refuses creating AF_UNIX sockets: Landlock does not
	// restrict Unix-socket connects below ABI 9.
	DenyUnixSockets bool `json:"deny_unix_sockets"`
	// NoListen refuses listen(2), for roles that serve nothing: a listen
	// without bind auto-binds an ephemeral port, and Landlock's bind rule
	// never sees it.
	NoListen bool `json:"no_listen,omitempty"`
	// NoUDP refuses datagram Internet sockets (UDP, UDP-Lite, ICMP
	// "ping"): Landlock's network rules cover TCP only, so a UDP socket
	// could send anywhere the route reaches.
	NoUDP bool `json:"no_udp,omitempty"`
	// NoNetlink refuses AF_NETLINK sockets, which reach kernel interfaces
	// (routes, interfaces, audit, netfilter) no role needs. Go's net
	// package uses them only for net.Interfaces and interface addresses.
	NoNetlink bool `json:"no_netlink,omitempty"`

	// BestEffort names layers the spec explicitly accepts as best effort:
	// if the kernel cannot enforce one, the degradation is reported instead
	// of stopping the role. Every other layer fails closed.
	BestEffort []string `json:"best_effort,omitempty"`

	// GoMaxProcs and GoMemLimitBytes match the Go runtime to the
	// container's CPU and memory limits (0 leaves the runtime default).
	GoMaxProcs      int   `json:"gomaxprocs,omitempty"`
	GoMemLimitBytes int64 `json:"gomemlimit_bytes,omitempty"`
}

// Landlock is the filesystem and network part of a [Policy].
type Landlock struct {
	// MinABI is the lowest Landlock ABI that enforces every rule below.
	// Each layer checks the part it needs: landlock-fs the newest
	// filesystem step at or below it (1, 2, 3, 5, 6 or 9), landlock-net
	// always ABI 4. So min_abi 4 with landlock-net best effort runs on an
	// ABI 3 kernel with the filesystem rules enforced.
	MinABI int `json:"min_abi"`

	ReadOnlyDirs   []string `json:"read_only_dirs"`   // read and list, no write, no execute
	ReadOnlyFiles  []string `json:"read_only_files"`  // e.g. /etc/passwd, /dev/urandom
	ReadWriteDirs  []string `json:"read_write_dirs"`  // read and write, never execute: /tmp, /sandbox-work, output
	ReadWriteFiles []string `json:"read_write_files"` // e.g. /dev/null
	// ExecFiles may be executed (the role's own binary, for a re-exec).
	ExecFiles []string `json:"exec_files,omitempty"`
	// ExecDirs may be read and their files executed, never written: a
	// workload image's read-only tree when the spec grants shell_access.
	ExecDirs []string `json:"exec_dirs,omitempty"`

	// ConnectTCP and BindTCP are the only TCP ports the role may connect
	// to and bind, where the kernel's ABI has network rules (>= 4).
	ConnectTCP []uint16 `json:"connect_tcp"`
	BindTCP    []uint16 `json:"bind_tcp"`
}
