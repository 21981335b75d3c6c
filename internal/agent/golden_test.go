package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

// golden compares got with testdata/name, or rewrites it with -update
// (internal/testutil).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testutil.Golden(t, filepath.Join("testdata", name), got)
}

// The tools offered to the model are a contract with it: the local tools
// around the sidecar's, in this order, with these schemas.
func TestOfferedToolsGolden(t *testing.T) {
	_, url := startSidecar(t)
	cfg := Config{SidecarURL: url, RequestTimeout: DefaultRequestTimeout}
	s, err := connectSidecar(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ts, err := newToolset(context.Background(), s, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(ts.offered, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "offered-tools.json", append(got, '\n'))
}

// The connectivity check's table is parsed by doctor (columns separated by
// two or more spaces); its shape is pinned here.
func TestCheckTableGolden(t *testing.T) {
	var b bytes.Buffer
	printChecks(&b, []Check{
		{Name: "sidecar tools", OK: true, Detail: "4 tools: a, b, c, d"},
		{Name: "gateway refuses .invalid", OK: false, Detail: "egress-gateway:3128 answered 200: ok"},
	})
	golden(t, "check-table.txt", b.Bytes())
}
