// Package testutil holds the helpers the tests of several packages share;
// only test files import it. Golden files: [Golden] compares output with a
// file under testdata/, and `go test ./... -update` rewrites them.
package testutil

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Updating reports whether the test run rewrites golden files (-update).
func Updating() bool { return *update }

// Golden compares got with the file at path; under -update it writes got
// there instead (creating the directory). A missing file says how to make
// it.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}
