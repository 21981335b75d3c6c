package timeline

import (
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

// TestWireFieldsCovered: every field the timeline's private wire types
// read is one its producer's own type writes (TestProducersContract
// checks the values get through for one run; this checks every field).
func TestWireFieldsCovered(t *testing.T) {
	testutil.WireFieldsCovered(t, runs.FileAudit, auditLine{}, sidecar.Record{})
	testutil.WireFieldsCovered(t, runs.FileDecisions, decisionLine{}, egress.Decision{})
	testutil.WireFieldsCovered(t, runs.FileAgentTurns, turnLine{}, agent.Turn{})
	// A container's start and end are read when a harness records them;
	// ours does not yet (the container's phase places it).
	testutil.WireFieldsCovered(t, runs.MetadataFile, runMetadata{}, runs.Metadata{}, "containers.started", "containers.finished")
	testutil.WireFieldsCovered(t, runs.FileGatewayPolicy, Policy{}, netpolicy.Config{})
	// What the report's glance reads besides: each role's hardening and
	// the host's observation of it from run-metadata.json, each
	// container's configuration and the softening ledger from
	// resolved-profile.json (spec.Artifacts writes a spec.Profile).
	testutil.WireFieldsCovered(t, runs.MetadataFile+" hardening", RoleReport{}, runs.RoleHardening{})
	testutil.WireFieldsCovered(t, runs.MetadataFile+" observed", Observation{}, runs.Observation{})
	testutil.WireFieldsCovered(t, runs.FileResolvedProfile+" containers", ContainerConfig{}, spec.Container{})
	testutil.WireFieldsCovered(t, runs.FileResolvedProfile+" softening_ledger", Softening{}, spec.Softening{})
}
