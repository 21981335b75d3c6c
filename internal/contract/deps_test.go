package contract

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The import rules, in the style of tailscale's deps_test.go: what runs
// inside a container must not carry the host's Docker machinery, and the
// contract packages that both sides import stay small.

const module = "github.com/mcpsidecar/mcpsidecar/"

// rolePackages run inside the sandbox's containers.
var rolePackages = []string{"roles", "agent", "sidecar", "egress", "probe", "harden", "launcher", "netpolicy", "hold", "holder", "mcppin"}

// notInRoles are the host's: the Docker SDK and what drives it, and the
// host's judgement of a run (verdict).
var notInRoles = []string{
	module + "internal/dockerx", module + "internal/orchestrate", module + "internal/sandbox", module + "internal/cli",
	module + "internal/timeline", module + "internal/verdict", "github.com/moby/moby/client", "github.com/docker/docker",
}

// deps lists the packages pkg imports, directly or not (go list -deps).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath", module+pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var list []string
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct{ ImportPath string }
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		list = append(list, p.ImportPath)
	}
	return list
}

func TestRolesDoNotImportTheHost(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, role := range rolePackages {
		t.Run(role, func(t *testing.T) {
			for _, d := range deps(t, "internal/"+role) {
				for _, bad := range notInRoles {
					if d == bad || strings.HasPrefix(d, bad+"/") {
						t.Errorf("internal/%s imports %s (host side)", role, d)
					}
				}
			}
		})
	}
}

// TestContractPackagesStaySmall: the homes of the shared names (runs,
// hold, exitcode, enginever, trace, agentenv, hardenpolicy, squidimage),
// of redaction (redact) and of the roles' capped log (caplog) are
// imported by roles and host alike, so they import no other package of
// this module beyond termtext.
func TestContractPackagesStaySmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, pkg := range []string{"internal/runs", "internal/hold", "internal/exitcode", "internal/enginever", "internal/trace", "internal/redact", "internal/agent/agentenv",
		"internal/harden/hardenpolicy", "internal/egress/squidimage", "internal/caplog"} {
		for _, d := range deps(t, pkg) {
			if strings.HasPrefix(d, module) && d != module+pkg && d != module+"internal/termtext" {
				t.Errorf("%s imports %s", pkg, d)
			}
		}
	}
}

// TestPlannerImportsNoRole: the host planner (internal/orchestrate) names
// what the roles own (their environment variables, the Squid image, the
// hardening policy) through the leaves they share with the host
// (agentenv, squidimage, hardenpolicy), never through a role package, so
// it carries none of the roles' code (the model client, the MCP SDK, the
// gateway, Landlock and seccomp filters) and stays a planner.
func TestPlannerImportsNoRole(t *testing.T) {
	list := deps(t, "internal/orchestrate")
	if !slices.Contains(list, module+"internal/orchestrate") || !slices.Contains(list, module+"internal/dockerx") {
		t.Fatalf("go list -deps internal/orchestrate listed %d packages without orchestrate or dockerx: not its graph", len(list))
	}
	for _, d := range list {
		for _, role := range roleCode {
			if d == module+role {
				t.Errorf("internal/orchestrate imports %s (role code): import the leaf that holds the name instead", d)
			}
		}
		for _, lib := range []string{"github.com/modelcontextprotocol/go-sdk", "github.com/sashabaranov/go-openai", "github.com/landlock-lsm/go-landlock"} {
			if d == lib || strings.HasPrefix(d, lib+"/") {
				t.Errorf("internal/orchestrate imports %s (a role's library)", d)
			}
		}
	}
}
