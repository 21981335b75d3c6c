package contract

import (
	"strings"
	"testing"
)

// notInRoleBinary are what the slim role binary (cmd/mcpsidecar-role,
// issue 31) must not carry: the command framework, the Docker and
// Kubernetes clients, and our host side that drives them. What runs in
// every container is then only the roles' code.
var notInRoleBinary = []string{
	"github.com/spf13/cobra", "github.com/spf13/pflag",
	"k8s.io/client-go", "github.com/docker/docker/client", "github.com/moby/moby/client",
	module + "internal/cli", module + "internal/dockerx", module + "internal/sandbox", module + "internal/kube",
	module + "internal/orchestrate",
}

// TestRoleBinaryDeps: go list -deps of the role binary, for each machine
// an engine runs, reaches none of notInRoleBinary (internal/kube's
// subpackages for the pods' side, netguard and layercheck, excepted: they
// import no client).
func TestRoleBinaryDeps(t *testing.T) {
	for _, target := range []string{"linux/amd64", "linux/arm64"} {
		t.Run(strings.ReplaceAll(target, "/", "_"), func(t *testing.T) {
			deps := depsFor(t, target, "cmd/mcpsidecar-role")
			var roles bool
			for _, d := range deps {
				roles = roles || d == module+"internal/roles"
				for _, bad := range notInRoleBinary {
					if d == bad || (strings.HasPrefix(d, bad+"/") && !allowedKubeSub(d)) {
						t.Errorf("the role binary (%s) imports %s", target, d)
					}
				}
			}
			if !roles || len(deps) < 50 {
				t.Fatalf("go list -deps listed %d packages without internal/roles: not the role binary's graph", len(deps))
			}
		})
	}
}

// allowedKubeSub are internal/kube's packages of the pods' side.
func allowedKubeSub(pkg string) bool {
	return pkg == module+"internal/kube/netguard" || pkg == module+"internal/kube/layercheck"
}
