package sandbox

import (
	"fmt"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
)

// A workload image that declares VOLUME is refused before any container
// is created (red-team finding redteam2 #1). The engine mounts an
// anonymous volume at each declared path in every container of the
// image, whatever the plan says: a directory of the host's disk, mounted
// read-write and executable (Docker cannot mount a volume noexec), that
// the tmpfs size bounds, the output cap and the run's record never see.
// Under a writable path (/tmp/v) it is a place a library the workload
// writes can be mapped executable from; under the output directory what
// is written there is removed with the container and never reaches the
// record; anywhere else it is still a host-disk write the run does not
// account for (a path outside the Landlock policy's writable directories
// is unwritable to the workload today, but a later spec granting it
// would reopen the hole). So every volume is refused, not only those
// under a writable path; nothing of a workload needs one: it writes to
// /tmp, /sandbox-work and its output directory, which the harness mounts
// itself. The launcher checks the same from inside (every mount at or
// below a writable directory must be noexec,nosuid,nodev). The Squid
// image (--squid-image, an image we did not build) is held to the same
// rule; our own image is FROM scratch without one (TestOwnImageNoVolume).

// hintImageVolumes is what the user can do about such an image.
const hintImageVolumes = "rebuild the image without VOLUME (a base image's VOLUME is inherited and no instruction removes it: " +
	"build from a base without one); the harness mounts every path a container may write itself (/tmp, /sandbox-work, the output directory)"

// refuseImageVolumes fails, exit 5, when an image declares any volume,
// naming each path; what says whose image it is ("workload image").
func refuseImageVolumes(what, image string, volumes []string) error {
	if len(volumes) == 0 {
		return nil
	}
	return exitcode.WithHint(exitcode.Unavailable, fmt.Errorf("%s %s declares VOLUME %s: the engine would mount a volume of the host's disk there, "+
		"writable and executable, outside the tmpfs bounds, the output cap and the run's record; refusing to run it", what, image, strings.Join(volumes, ", ")), hintImageVolumes)
}
