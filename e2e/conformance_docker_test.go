//go:build docker

package e2e

// The conformance suite (conformance_test.go) on the Docker backend, the
// default, against the engine on this machine:
//
//	make testbin
//	MCPSIDECAR_BIN=$PWD/bin/mcpsidecar-test MCPSIDECAR_ALLOW_OLD_ENGINE=1 \
//	  go test -count=1 -tags docker -run '^TestConformanceDocker' ./e2e/

import (
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
)

// dockerUnderTest is the Docker backend: a run is three containers and
// two networks (volumes only when output goes through the engine), found
// by the test's label.
func dockerUnderTest() backendUnderTest {
	return backendUnderTest{
		name:        "docker",
		leftovers:   dockerLeftovers,
		cleanup:     func(t *testing.T, id string) { CleanupLabelled(t, "mcpsidecar.e2e="+id) },
		running:     regexp.MustCompile(`(?m)^\[agent\s*\]`),
		objects:     5,
		startWait:   3 * time.Minute,
		endWait:     time.Minute,
		phases:      []string{"spec", "preflight", "image", "run-dir", "networks", "gateway", "sidecar", "agent", "wait", "collect", "teardown"},
		recordOnly:  map[string]string{},
		recordLacks: map[string]string{},
		gatewayFails: startFailure{code: exitcode.Runtime, says: []string{"starting the gateway", "exited with code 2 before it was ready"},
			showsOutput: true},
		// Killed at the timeout: 128+SIGKILL.
		timedOutExit: "137",
	}
}

// dockerLeftovers lists the containers, networks and volumes labelled
// mcpsidecar.e2e=id.
func dockerLeftovers(t *testing.T, id string) []string {
	t.Helper()
	label := "mcpsidecar.e2e=" + id
	cs, ns := Leftovers(t, label)
	var out []string
	for _, c := range cs {
		out = append(out, "container "+c)
	}
	for _, n := range ns {
		out = append(out, "network "+n)
	}
	for _, v := range LeftVolumes(t, label) {
		out = append(out, "volume "+v)
	}
	slices.Sort(out)
	return out
}

func TestConformanceDocker(t *testing.T) {
	NeedDocker(t)
	runConformance(t, dockerUnderTest())
}
