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

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// runFiles are the run-directory names internal/runs declares.
var runFiles = []string{
	runs.FileSandboxSpec, runs.FileResolvedProfile, runs.FileLandlockPolicy, runs.FileSeccompProfile, runs.FileSquidConf,
	runs.FileDockerfile, runs.FileGatewayPolicy, runs.FileProbeConfig, runs.FileLedger, runs.FileStdout, runs.FileStderr,
	runs.FileAnswer, runs.FileAgentTurns, runs.FileProbeReport, runs.FileProbeStatus, runs.FileProbeDone,
	runs.FileDecisions, runs.FileAudit, runs.FileHardenReport, runs.FileSquidAccessLog, runs.FileGatewayLogs,
	runs.FileSidecarLogs, runs.FileSidecarStdout, runs.FileSidecarStderr, runs.FileSidecarMetadata, runs.FileKubeLayers,
	runs.FileTimeline, runs.FileReport, runs.MetadataFile,
}

// literal is one string literal in non-test Go code: its package
// directory (relative to the module) and its value.
type literal struct{ pkg, value string }

// literals returns every string literal of the module's non-test Go files.
func literals(t *testing.T) []literal {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var out []literal
	fset := token.NewFileSet()
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
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		ast.Inspect(f, func(n ast.Node) bool {
			if bl, ok := n.(*ast.BasicLit); ok && bl.Kind == token.STRING {
				if v, err := strconv.Unquote(bl.Value); err == nil {
					out = append(out, literal{pkg: filepath.ToSlash(rel), value: v})
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ratchet compares the places found with the places still allowed: a new
// one fails (declare the name in its home and import it), and so does one
// that is gone (shrink the list, so it stays true).
func ratchet(t *testing.T, what string, found map[string]bool, allowed []string) {
	t.Helper()
	var extra, gone []string
	for p := range found {
		if !slices.Contains(allowed, p) {
			extra = append(extra, p)
		}
	}
	for _, p := range allowed {
		if !found[p] {
			gone = append(gone, p)
		}
	}
	sort.Strings(extra)
	sort.Strings(gone)
	for _, p := range extra {
		t.Errorf("%s spelled outside its home: %s", what, p)
	}
	for _, p := range gone {
		t.Errorf("%s no longer spelled at %s: remove it from the list in names_test.go", what, p)
	}
}

// TestRunFileNamesHaveOneHome: a run-directory file name is spelled only
// in internal/runs; every other package imports it.
func TestRunFileNamesHaveOneHome(t *testing.T) {
	found := map[string]bool{}
	for _, l := range literals(t) {
		if l.pkg != "internal/runs" && slices.Contains(runFiles, l.value) {
			found[l.pkg+" "+l.value] = true
		}
	}
	ratchet(t, "run-directory file name", found, runFileLiteralsLeft)
}

// envName is the shape of the variables the host and the roles share:
// ours, the model's (OPENAI_*) and the agent container's (MCP_SIDECAR_URL,
// SANDBOX_AGENT_CONTAINER). HTTP_PROXY, HTTPS_PROXY and NO_PROXY are a
// convention of every HTTP client, not a contract of ours, and are left
// out.
var envName = regexp.MustCompile(`^(MCPSIDECAR|OPENAI|MCP|SANDBOX)_[A-Z0-9_]+$`)

// TestEnvNamesHaveOneHome: each variable's name is spelled in one package,
// its owner's; the others import the owner's constant.
func TestEnvNamesHaveOneHome(t *testing.T) {
	pkgs := map[string]map[string]bool{}
	for _, l := range literals(t) {
		if envName.MatchString(l.value) {
			if pkgs[l.value] == nil {
				pkgs[l.value] = map[string]bool{}
			}
			pkgs[l.value][l.pkg] = true
		}
	}
	found := map[string]bool{}
	for name, ps := range pkgs {
		if len(ps) < 2 {
			continue
		}
		for p := range ps {
			found[p+" "+name] = true
		}
	}
	ratchet(t, "environment variable name", found, envLiteralsLeft)
}

// TestRunFilesListed: every name internal/runs declares is distinct.
func TestRunFilesListed(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range runFiles {
		if seen[f] {
			t.Errorf("%s declared twice in internal/runs", f)
		}
		seen[f] = true
	}
	if _, err := os.Stat(filepath.Join("..", "runs", "files.go")); err != nil {
		t.Fatal(err)
	}
}
