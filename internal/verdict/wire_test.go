package verdict

import (
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sidecar"
	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

// TestWireFieldsCovered: every audit field the verdict reads is one the
// sidecar's record writes (turns and metadata it reads with their
// producers' own types, agent.Turn and runs.Metadata).
func TestWireFieldsCovered(t *testing.T) {
	testutil.WireFieldsCovered(t, runs.FileAudit, auditLine{}, sidecar.Record{})
}
