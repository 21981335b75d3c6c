package timeline

import (
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar"
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
}
