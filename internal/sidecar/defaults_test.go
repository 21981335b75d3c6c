//go:build linux

package sidecar

import (
	"slices"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/sidecar/learn"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// TestSpecDefaultsMatch keeps the spec's view of the default server and of
// the local tools equal to what the sidecar serves.
func TestSpecDefaultsMatch(t *testing.T) {
	var names []string
	for _, tool := range learn.Tools() {
		names = append(names, tool.Name)
	}
	if !slices.Equal(names, spec.DefaultMCPTools) {
		t.Errorf("spec.DefaultMCPTools = %v, learn publishes %v", spec.DefaultMCPTools, names)
	}
	if spec.DefaultMCPURL != learn.DefaultEndpoint || spec.DefaultMCPName != learnServer {
		t.Errorf("spec default %s %s, sidecar %s %s", spec.DefaultMCPName, spec.DefaultMCPURL, learnServer, learn.DefaultEndpoint)
	}
	if !slices.Equal(spec.LocalToolNames, localToolNames) {
		t.Errorf("spec.LocalToolNames = %v, the sidecar's are %v", spec.LocalToolNames, localToolNames)
	}
}
