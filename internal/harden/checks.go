package harden

import (
	"errors"
	"fmt"
	"syscall"
)

// Actions a self-test [Check] can attempt. Each performs the real
// operation; an error that only the kernel's own logic returns after the
// syscall was let through (ESRCH for ptrace of a non-tracee, EINVAL for
// unshare in a multi-threaded process, ENODEV for a mount of an unknown
// filesystem type) counts as "ok": the layer under test did not stop it.
const (
	ActRead        = "read"         // arg: file to read
	ActWrite       = "write"        // arg: file to create
	ActExec        = "exec"         // arg: program to run as `program version`
	ActWriteExec   = "write-exec"   // arg: dir; copy our own executable there and run it
	ActConnect     = "connect"      // arg: host:port, TCP
	ActBind        = "bind"         // arg: host:port, TCP via net.Listen (MPTCP first, Go's default)
	ActUnixSocket  = "unix-socket"  // socket(AF_UNIX)
	ActSocketpair  = "socketpair"   // socketpair(AF_UNIX)
	ActPtrace      = "ptrace"       // ptrace(PEEKDATA) on the parent
	ActUnshareUser = "unshare-user" // unshare(CLONE_NEWUSER)
	ActMount       = "mount"        // mount an unknown filesystem type on /
	ActKeyctl      = "keyctl"       // keyctl(GET_KEYRING_ID, session)
	ActIOUring     = "io-uring"     // io_uring_setup
	ActFsize       = "fsize"        // arg: file; write 128 KiB under a 64 KiB RLIMIT_FSIZE

	// TCP Fast Open: a connect that Landlock's connect rule never sees.
	ActTFOSendto  = "tfo-sendto"  // arg: host:port; sendto(MSG_FASTOPEN) on an unconnected TCP socket
	ActTFOConnect = "tfo-connect" // setsockopt(IPPROTO_TCP, TCP_FASTOPEN_CONNECT, 1)
	// Setuid and setgid files: arg is a writable dir; the file is removed after.
	ActChmodSetuid     = "chmod-setuid"     // fchmodat(0755 -> 04755), what chmod u+s does
	ActChmodSetgid     = "chmod-setgid"     // fchmodat(0755 -> 02755), what chmod g+s does
	ActFchmodSetuid    = "fchmod-setuid"    // fchmod(04755)
	ActFchmodat2Setuid = "fchmodat2-setuid" // fchmodat2(04755)
	ActCreateSetuid    = "create-setuid"    // openat(O_CREAT, 04755)
	ActMknodSetuid     = "mknod-setuid"     // mknodat(S_IFREG|04755)
	// Sockets a role that serves nothing and needs no UDP must not get.
	ActListenUnbound = "listen-unbound" // listen(2) on a TCP socket never bound: the kernel picks a port
	ActUDPSocket     = "udp-socket"     // socket(AF_INET, SOCK_DGRAM, 0)
	ActPingSocket    = "ping-socket"    // socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP)
	ActNetlink       = "netlink-socket" // socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE)
	ActRawSocket     = "raw-socket"     // socket(AF_INET, SOCK_RAW, IPPROTO_ICMP)
	ActPacketSocket  = "packet-socket"  // socket(AF_PACKET, SOCK_RAW, ETH_P_ALL)
	// ActLookup resolves arg with Go's resolver: a name in /etc/hosts
	// resolves without a DNS query, so without any UDP socket.
	ActLookup = "lookup"
)

// Outcomes of an attempt.
const (
	OutcomeOK     = "ok"
	OutcomeDenied = "denied" // EPERM or EACCES
	OutcomeEFBIG  = "efbig"  // the fsize limit held and the process lived
	OutcomeError  = "error"  // anything else
)

// EnvExecProbe is set for programs started by [ActExec] and
// [ActWriteExec], so a test binary exits at once instead of running tests.
const EnvExecProbe = "MCPSIDECAR_HARDEN_EXEC_PROBE"

// Check is one attempt and the outcome it must have.
type Check struct {
	Name   string `json:"name"`
	Action string `json:"action"`
	Arg    string `json:"arg,omitempty"`
	Want   string `json:"want"`
}

// CheckResult is a check with what happened.
type CheckResult struct {
	Check
	Got   string `json:"got"`
	Error string `json:"error,omitempty"`
	Pass  bool   `json:"pass"`
}

// RunChecks attempts every check in order.
func RunChecks(checks []Check) []CheckResult {
	results := make([]CheckResult, 0, len(checks))
	for _, c := range checks {
		err := Try(c.Action, c.Arg)
		r := CheckResult{Check: c, Got: Outcome(err)}
		if err != nil {
			r.Error = err.Error()
		}
		r.Pass = r.Got == c.Want
		results = append(results, r)
	}
	return results
}

// Outcome classifies the error of [Try].
func Outcome(err error) string {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return OutcomeDenied
	case errors.Is(err, syscall.EFBIG):
		return OutcomeEFBIG
	}
	return OutcomeError
}

// Try attempts one action and returns its error (nil when it succeeded).
func Try(action, arg string) error {
	fn, ok := actions[action]
	if !ok {
		return fmt.Errorf("unknown self-test action %q", action)
	}
	return fn(arg)
}
