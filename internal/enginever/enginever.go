// Package enginever is the one rule about Docker Engine versions, for the
// host (which accepts or refuses an engine and judges doctor's checks) and
// for the agent's connectivity check in the container (which the host
// tells the engine's version through agent.EnvEngineVersion).
package enginever

import (
	"fmt"
	"strconv"
	"strings"
)

// RouteFixed is the first engine that gives containers on --internal
// networks no default route (moby PR 46603); older engines give them a
// gateway on the bridge, whose forwarding Docker's isolation rules drop.
const RouteFixed = 25

// Min is the oldest engine the harness runs on without --allow-old-engine:
// from 26, containers on --internal networks neither resolve external
// names (CVE-2024-29018) nor get a default route.
const Min = 26

// Major reads the major version of an engine version such as
// "20.10.24+dfsg1" or "27.3.1".
func Major(v string) (int, error) {
	head, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(head)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("reading engine version %q: want MAJOR.MINOR.PATCH", v)
	}
	return n, nil
}

// Before reports whether v is a known version older than major; an
// unreadable v is not known to be older.
func Before(v string, major int) bool {
	n, err := Major(v)
	return err == nil && n < major
}
