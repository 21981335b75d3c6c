package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// backendNames are what names one backend: its type, its constructor,
// its configuration, or the packages only it drives.
var backendNames = map[string]bool{"dockerBackend": true, "kubeBackend": true, "dockerbackend": true, "kubebackend": true,
	"Docker": true, "Kubernetes": true, "Kube": true}

// TestLifecycleNamesNoBackend: the lifecycle calls its Backend and never
// asks which one it got. No file of package sandbox names a backend's
// type, constructor, package or configuration, or imports a Kubernetes
// package: the sequencer and the stages alike (the backends live in
// internal/dockerbackend and internal/kube/backend).
func TestLifecycleNamesNoBackend(t *testing.T) {
	dir := filepath.Join("..", "sandbox")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) < 10 {
		t.Fatalf("the sandbox package's files: %q, %v", files, err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		name := filepath.Base(path)
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
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

// TestBackendsApart: the lifecycle package imports neither backend's
// package (cli wires one in), and the Kubernetes backend does not import
// the Docker backend: what both need of this host (the run directory's
// noexec output folders) is internal/hostoutput's.
func TestBackendsApart(t *testing.T) {
	backends := []string{module + "internal/dockerbackend", module + "internal/kube/backend"}
	for _, d := range deps(t, "internal/sandbox") {
		if slices.Contains(backends, d) {
			t.Errorf("internal/sandbox depends on %s: the lifecycle names no backend", d)
		}
	}
	for _, d := range deps(t, "internal/kube/backend") {
		if d == backends[0] {
			t.Errorf("internal/kube/backend depends on %s: each backend stands on its own", d)
		}
	}
	for _, d := range deps(t, "internal/dockerbackend") {
		if d == backends[1] || d == module+"internal/kube" || strings.HasPrefix(d, "k8s.io/") {
			t.Errorf("internal/dockerbackend depends on %s: each backend stands on its own", d)
		}
	}
	for _, d := range deps(t, "internal/hostoutput") {
		if slices.Contains(backends, d) {
			t.Errorf("internal/hostoutput depends on %s: both backends use it", d)
		}
	}
}
