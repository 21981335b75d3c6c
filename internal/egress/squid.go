package egress

import (
	"github.com/mcpsidecar/mcpsidecar/internal/egress/squidimage"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// What the harness needs to run the Squid engine (docs/egress.md): the
// image scripts/build-squid-image.sh builds, the user it runs as, the
// tmpfs mounts it needs on a read-only root filesystem, where the
// generated squid.conf goes, and the access log it writes into the
// output directory (read back with [ParseSquidAccessLog]).
const (
	SquidImage         = squidimage.Image
	SquidUser          = squidimage.User // proxy:proxy in the image's /etc/passwd
	SquidConfPath      = squidimage.ConfPath
	SquidAccessLogFile = runs.FileSquidAccessLog
	SquidReadyLine     = "Accepting HTTP Socket connections" // in the container's log once it listens
)

// SquidTmpfs are the writable mounts Squid needs on a read-only root: its
// pid file (/run/squid.pid), its spool directory and /tmp (cache log).
var SquidTmpfs = squidimage.Tmpfs
