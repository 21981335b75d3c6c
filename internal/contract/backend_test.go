package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// lifecycleFiles are the sandbox package's sequencer: the stages every
// run goes through whatever its backend (internal/sandbox/backend.go).
var lifecycleFiles = []string{"sandbox.go", "steps.go", "collect.go", "record.go", "redact.go", "doctor_verdict.go", "credentials.go", "harden.go"}

// backendNames are what names one backend: its type, its constructor,
// its configuration, or the packages only it drives.
var backendNames = map[string]bool{"dockerBackend": true, "kubeBackend": true, "Docker": true, "Kubernetes": true, "Kube": true}

// TestLifecycleNamesNoBackend: the lifecycle calls its Backend and never
// asks which one it got. Its files name no backend type, constructor or
// configuration, and import no Kubernetes package.
func TestLifecycleNamesNoBackend(t *testing.T) {
	dir := filepath.Join("..", "sandbox")
	fset := token.NewFileSet()
	for _, name := range lifecycleFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p := strings.Trim(imp.Path.Value, `"`); strings.HasSuffix(p, "/internal/kube") || strings.HasPrefix(p, "k8s.io/") {
				t.Errorf("%s imports %s: the lifecycle names no backend's package", name, p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.Ident:
				if backendNames[x.Name] {
					t.Errorf("%s: names %s, a backend (%s)", name, x.Name, fset.Position(x.Pos()))
				}
			case *ast.SelectorExpr:
				if backendNames[x.Sel.Name] {
					t.Errorf("%s: names .%s, a backend (%s)", name, x.Sel.Name, fset.Position(x.Pos()))
				}
			}
			return true
		})
	}
}

// TestPlanIsNeutral: the plan package imports only the standard library,
// and the Kubernetes backend does not import the Docker adapter: each
// maps the plan on its own, and neither reads the other's option strings.
func TestPlanIsNeutral(t *testing.T) {
	for _, d := range deps(t, "internal/plan") {
		if strings.Contains(d, ".") && !strings.HasPrefix(d, module+"internal/plan") {
			t.Errorf("internal/plan depends on %s: it holds data, for every backend", d)
		}
	}
	out, err := exec.Command("go", "list", "-f", "{{join .Imports \"\\n\"}}", module+"internal/kube").Output()
	if err != nil {
		t.Fatalf("go list internal/kube: %v", err)
	}
	for _, imp := range strings.Fields(string(out)) {
		if imp == module+"internal/dockerx" || strings.HasPrefix(imp, "github.com/moby/") || strings.HasPrefix(imp, "github.com/docker/") {
			t.Errorf("internal/kube imports %s: it maps the plan (internal/plan), not Docker's", imp)
		}
	}
}

// TestSandboxImportsNoBackend: the lifecycle package imports neither the
// Kubernetes backend nor the Kubernetes client (cli wires the backend in),
// and the Kubernetes backend's package is the only one below cli that
// imports both the lifecycle and the client.
func TestSandboxImportsNoBackend(t *testing.T) {
	for _, d := range deps(t, "internal/sandbox") {
		if d == module+"internal/kube" || strings.HasPrefix(d, module+"internal/kube/") || strings.HasPrefix(d, "k8s.io/") {
			t.Errorf("internal/sandbox depends on %s: the lifecycle names no backend", d)
		}
	}
}
