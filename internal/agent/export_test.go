package agent

import (
	"os"
	"testing"
)

// For the external tests (package agent_test), which may import
// internal/verdict: it imports this package, so a test of this package
// could not.
const TestKey = testKey

var (
	ReadTurns = readTurns
	ReadFile  = readFile
	TraceIDOf = traceIDOf
)

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
