package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The command registry (internal/cli, root.go): every command of a build
// comes from one function of parts that build constraints choose, so the
// command tree is what that function says, in any order of files; no
// command, flag or output rule is added from an init function.

// initFuncs lists the package-level init functions of the Go files in
// dir, whatever their build constraints, as file:line.
func initFuncs(t *testing.T, fset *token.FileSet, dir string) (found []string, files int) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files++
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "init" {
				found = append(found, fset.Position(fn.Pos()).String())
			}
		}
	}
	return found, files
}

func TestCLIHasNoInit(t *testing.T) {
	fset := token.NewFileSet()
	found, files := initFuncs(t, fset, filepath.Join("..", "cli"))
	if files < 50 {
		t.Fatalf("read %d Go files in internal/cli: not the package", files)
	}
	for _, at := range found {
		t.Errorf("%s: func init in internal/cli; add the command to the registry (commands, root.go) instead", at)
	}
	// The check finds one where there is one.
	dir := t.TempDir()
	src := "//go:build testcommands\n\npackage cli\n\nfunc init() {}\n\nfunc (x) init() {}\n"
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := initFuncs(t, fset, dir); len(got) != 1 {
		t.Errorf("a file with func init: found %q, want one", got)
	}
}
