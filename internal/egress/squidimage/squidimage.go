// Package squidimage names what the host needs to run the Squid gateway
// engine (docs/egress.md): the image scripts/build-squid-image.sh builds,
// the user it runs as, the tmpfs mounts it needs on a read-only root
// filesystem and where the generated squid.conf goes. The gateway role
// owns them (internal/egress re-exports them as SquidImage, SquidUser,
// SquidConfPath and SquidTmpfs); they live in this leaf so that the
// host's planner (internal/orchestrate) can import them without the
// gateway's code. It imports nothing.
package squidimage

const (
	// Image is the Squid image the build script tags.
	Image = "mcpsidecar-squid:local"
	// User is proxy:proxy in the image's /etc/passwd.
	User = "13:13"
	// ConfPath is where the image's entrypoint reads squid.conf.
	ConfPath = "/etc/squid/squid.conf"
)

// Tmpfs are the writable mounts Squid needs on a read-only root: its pid
// file (/run/squid.pid), its spool directory and /tmp (cache log).
var Tmpfs = map[string]string{
	"/run":             "rw,noexec,nosuid,nodev,size=1048576,uid=13,gid=13,mode=0755",
	"/var/spool/squid": "rw,noexec,nosuid,nodev,size=1048576,uid=13,gid=13,mode=0755",
	"/tmp":             "rw,noexec,nosuid,nodev,size=16777216,mode=1777",
}
