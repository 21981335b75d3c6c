package contract

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The host binary for Windows and macOS (issue 31): the sandbox's
// containers are Linux whatever the host runs, so their code (the roles'
// commands and the kernel mechanisms they apply) is Linux-only and a
// non-Linux host binary carries none of it.

// linuxOnly are the libraries of the roles' kernel mechanisms: nftables
// and netlink (netguard), Landlock and seccomp filters (harden). A host
// build for another system must not reach them.
var linuxOnly = []string{
	"github.com/google/nftables", "github.com/mdlayher/netlink", "github.com/mdlayher/socket",
	"github.com/landlock-lsm/go-landlock", "github.com/elastic/go-seccomp-bpf",
}

// sharedRecordTypes are role packages a non-Linux host still imports, for
// the record's types and names only (the gateway's decisions, the
// sidecar's audit lines, the probe's report, the hardening report and
// policy, the agent's turns, the launcher's environment names, the
// netguard role's arguments); their Linux-only code is behind build tags.
// The list only shrinks: moving these names to syscall-free packages is
// the rest of issue 31's item 1.
var sharedRecordTypes = map[string]bool{
	"internal/agent": true, "internal/sidecar": true, "internal/egress": true, "internal/probe": true,
	"internal/harden": true, "internal/launcher": true, "internal/kube/netguard": true,
}

// roleCode are the packages of the roles that run in the containers
// (rolePackages without the contract packages netpolicy, hold and mcppin,
// which host and roles share by design).
var roleCode = []string{"internal/roles", "internal/agent", "internal/sidecar", "internal/egress", "internal/probe", "internal/harden", "internal/launcher", "internal/kube/netguard"}

// hostTargets are the non-Linux hosts of the release (make dist).
var hostTargets = []string{"windows/amd64", "windows/arm64", "darwin/amd64", "darwin/arm64"}

// depsFor is go list -deps of pkg for goos/goarch.
func depsFor(t *testing.T, target, pkg string) []string {
	t.Helper()
	goos, goarch, _ := strings.Cut(target, "/")
	cmd := exec.Command("go", "list", "-deps", module+pkg)
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("GOOS=%s GOARCH=%s go list -deps %s: %v", goos, goarch, pkg, err)
	}
	return strings.Fields(string(out))
}

func TestHostBinaryOffLinuxHasNoRoleCode(t *testing.T) {
	for _, target := range hostTargets {
		t.Run(strings.ReplaceAll(target, "/", "_"), func(t *testing.T) {
			deps := depsFor(t, target, "cmd/mcpsidecar")
			if len(deps) < 50 {
				t.Fatalf("go list -deps listed %d packages: not the host binary's graph", len(deps))
			}
			seen := map[string]bool{}
			for _, d := range deps {
				for _, bad := range linuxOnly {
					if d == bad || strings.HasPrefix(d, bad+"/") {
						t.Errorf("the %s host binary imports %s (Linux-only role mechanism)", target, d)
					}
				}
				for _, p := range roleCode {
					if d == module+p {
						seen[p] = true
						if !sharedRecordTypes[p] {
							t.Errorf("the %s host binary imports %s (role code)", target, d)
						}
					}
				}
			}
			for p := range sharedRecordTypes {
				if !seen[p] {
					t.Errorf("the %s host binary no longer imports %s: remove it from sharedRecordTypes", target, p)
				}
			}
		})
	}
}

// TestRoleCommandsAreLinuxOnly: the in-container roles' commands
// (internal/roles) and the file of the cli package that registers them
// are not built off Linux.
func TestRoleCommandsAreLinuxOnly(t *testing.T) {
	for _, target := range []string{"linux/amd64", "windows/amd64", "darwin/arm64"} {
		goos, goarch, _ := strings.Cut(target, "/")
		files := func(pkg string) []string {
			cmd := exec.Command("go", "list", "-e", "-f", "{{join .GoFiles \" \"}}", module+pkg)
			cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: go list %s: %v", target, pkg, err)
			}
			return strings.Fields(string(out))
		}
		cli := files("internal/cli")
		if has, want := slices.Contains(cli, "roles_linux.go"), goos == "linux"; has != want {
			t.Errorf("%s: internal/cli builds roles_linux.go: %v, want %v", target, has, want)
		}
		roles := files("internal/roles")
		if goos == "linux" && len(roles) < 10 {
			t.Errorf("%s: internal/roles builds only %v", target, roles)
		}
		if goos != "linux" && !slices.Equal(roles, []string{"doc.go"}) {
			t.Errorf("%s: internal/roles builds %v, want its doc.go alone", target, roles)
		}
	}
}
