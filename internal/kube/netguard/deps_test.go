package netguard

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRoleDoesNotImportTheHost: netguard runs in the agent pod's init
// container, so it must not carry the host's machinery (the rule of
// internal/contract's deps test, for a role package that list does not
// name yet).
func TestRoleDoesNotImportTheHost(t *testing.T) {
	const mod = "github.com/mcpsidecar/mcpsidecar/internal/"
	out, err := exec.Command("go", "list", "-deps", mod+"kube/netguard").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		for _, bad := range []string{mod + "kube", mod + "orchestrate", mod + "dockerx", mod + "sandbox", mod + "cli", "k8s.io/", "github.com/moby/"} {
			if d != mod+"kube/netguard" && (d == bad || strings.HasPrefix(d, bad)) {
				t.Errorf("netguard imports %s (host side)", d)
			}
		}
	}
}
