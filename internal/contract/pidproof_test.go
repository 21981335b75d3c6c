package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// pidProofFile is the one file that may open /proc/<pid>/ of a process
// the engine named, hold one (pidfd_open) or enter its namespaces
// (setns): dockerx.Prove and the methods of the process it proves
// (issue 32). Everything else on the host reaches a container's process
// through a dockerx.Process.
const pidProofFile = "internal/dockerx/proof_linux.go"

// procByPidLeft are the other files (module-relative) that build a
// /proc/<pid>/ path, each for a process that is not a container's seen
// from the host. The list may only shrink.
var procByPidLeft = map[string]string{
	// Inside the sandbox: the probe reads its own children and the
	// processes its pid namespace shows, to measure the sandbox.
	"internal/probe/cat_exec.go":      "the probe, in the sandbox",
	"internal/probe/waysout_files.go": "the probe, in the sandbox",
	// Inside a role's container: kube-stop reads its own pid 1.
	"internal/roles/kube_hold.go": "kube-stop, in the role's container",
	// Inside a helper container that shares a role's pid namespace:
	// observe-role reads the role's status there, not on the host.
	"internal/inside/observe_linux.go": "observe-role, in a helper sharing the role's pid namespace",
	// The benchmarks' helper reads the harness processes it started on
	// the host, never a container's.
	"scripts/internal/benchkit/benchkit.go": "benchmarks, processes they started",
	// The rootless engine's test harness finds the processes of the
	// engine's user it started (rootlesskit and its children) on the
	// host at teardown, never a container's.
	"internal/testutil/rootlesshost/teardown.go": "the rootless test engine's own processes",
}

// procByPid is a literal that starts a /proc/<pid>/ path: a format with
// the pid ("/proc/%d/…"), or "/proc/" to which a pid is appended.
var procByPid = regexp.MustCompile(`^/proc/(%|$)`)

// TestNoPidUseWithoutProof: no non-test file but the proof's calls setns
// or pidfd_open, and none but the proof's and the listed ones (none of a
// container's process) builds a /proc/<pid>/ path. Threat: a pid the
// engine reports is in the engine's pid namespace; on another host, in a
// VM or in a container it names an unrelated process here, whose
// namespace the host would enter and whose state it would report as the
// sandbox's.
func TestNoPidUseWithoutProof(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	proc := map[string]bool{}
	var calls []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (name == "testdata" || name == "e2e" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if rel == pidProofFile {
			return nil
		}
		uses, err := pidUses(path)
		for _, u := range uses {
			if u == "/proc/<pid>" {
				proc[rel] = true
			} else {
				calls = append(calls, rel+": "+u)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		t.Errorf("%s outside %s: a container's process is held and entered only through dockerx.Prove", c, pidProofFile)
	}
	var extra, gone []string
	for f := range proc {
		if _, ok := procByPidLeft[f]; !ok {
			extra = append(extra, f)
		}
	}
	for f := range procByPidLeft {
		if !proc[f] {
			gone = append(gone, f)
		}
	}
	sort.Strings(extra)
	sort.Strings(gone)
	for _, f := range extra {
		t.Errorf("%s builds a /proc/<pid>/ path: read a container's process through a dockerx.Process (%s)", f, pidProofFile)
	}
	for _, f := range gone {
		t.Errorf("%s no longer builds a /proc/<pid>/ path: remove it from procByPidLeft in pidproof_test.go", f)
	}
}

// pidUses lists what the file at path does with process ids: "setns" or
// "pidfd_open" for each such call, "/proc/<pid>" for each /proc/<pid>/
// path it builds (a literal procByPid matches, or filepath.Join("/proc",
// x) with x not a literal).
func pidUses(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if v, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING && procByPid.MatchString(v) {
				out = append(out, "/proc/<pid>")
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch name := sel.Sel.Name; {
			case name == "Setns" || name == "PidfdOpen":
				out = append(out, map[string]string{"Setns": "setns", "PidfdOpen": "pidfd_open"}[name])
			case name == "Join" && joinsProcPid(n.Args):
				out = append(out, "/proc/<pid>")
			}
		}
		return true
	})
	return out, nil
}

// joinsProcPid: the arguments of a Join start with "/proc" and go on with
// something computed.
func joinsProcPid(args []ast.Expr) bool {
	if len(args) < 2 {
		return false
	}
	first, ok := args[0].(*ast.BasicLit)
	if !ok || first.Value != `"/proc"` {
		return false
	}
	return slices.ContainsFunc(args[1:], func(a ast.Expr) bool {
		_, lit := a.(*ast.BasicLit)
		return !lit
	})
}

// TestPidUsesSeen: the scan sees each way a file may reach a process by
// its number, so TestNoPidUseWithoutProof can fail.
func TestPidUsesSeen(t *testing.T) {
	src := `package x

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

func f(pid, fd int) {
	os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "mountinfo"))
	unix.Setns(fd, unix.CLONE_NEWNET)
	unix.PidfdOpen(pid, 0)
	os.ReadFile("/proc/self/mountinfo")
	os.ReadDir("/proc")
	os.ReadFile(filepath.Join("/proc", "self", "status"))
}
`
	path := filepath.Join(t.TempDir(), "x.go")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := pidUses(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/proc/<pid>", "/proc/<pid>", "/proc/<pid>", "setns", "pidfd_open"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
