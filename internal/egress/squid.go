package egress

import "github.com/mcpsidecar/mcpsidecar/internal/runs"

// What the harness needs to run the Squid engine (docs/egress.md): the
// image scripts/build-squid-image.sh builds, the user it runs as, the
// tmpfs mounts it needs on a read-only root filesystem, where the
// generated squid.conf goes, and the access log it writes into the
// output directory (read back with [ParseSquidAccessLog]).
const (
	SquidImage         = "mcpsidecar-squid:local"
	SquidUser          = "13:13" // proxy:proxy in the image's /etc/passwd
	SquidConfPath      = "/etc/squid/squid.conf"
	SquidAccessLogFile = runs.FileSquidAccessLog
	SquidReadyLine     = "Accepting HTTP Socket connections" // in the container's log once it listens
)

// SquidTmpfs are the writable mounts Squid needs on a read-only root: its
// pid file (/run/squid.pid), its spool directory and /tmp (cache log).
var SquidTmpfs = map[string]string{
	"/run":             "rw,noexec,nosuid,nodev,size=1048576,uid=13,gid=13,mode=0755",
	"/var/spool/squid": "rw,noexec,nosuid,nodev,size=1048576,uid=13,gid=13,mode=0755",
	"/tmp":             "rw,noexec,nosuid,nodev,size=16777216,mode=1777",
}
