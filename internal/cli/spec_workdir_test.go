package cli

import (
	"os"
	"strings"
	"testing"
)

// chdirSpec makes a fresh working directory holding sandbox_spec.toml
// with text.
func chdirSpec(t *testing.T, text string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/"+workdirSpec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
}

// TestWorkdirSpecUsed: without --spec, ./sandbox_spec.toml is the spec
// every command loads, and each names it.
func TestWorkdirSpecUsed(t *testing.T) {
	chdirSpec(t, "schema_version = 1\ncapabilities = [\"shell_access\"]\n")
	tests := []struct {
		name string
		args []string
		out  string
	}{
		{"check", []string{"spec", "check"}, "sandbox_spec.toml: ok (capabilities: shell_access; containers: agent)"},
		{"check json", []string{"spec", "check", "--json"}, `"spec": "sandbox_spec.toml"`},
		{"resolve", []string{"spec", "resolve"}, "spec:         sandbox_spec.toml (hash "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tt.args...)
			if code != ExitOK || !strings.Contains(out, tt.out) {
				t.Fatalf("exit %d, stdout %q lacks %q; stderr %s", code, out, tt.out, errs)
			}
		})
	}
}

// TestWorkdirSpecSandboxCommands: run, doctor and test-sandbox load
// ./sandbox_spec.toml too, and say so on stderr before anything touches
// Docker: an invalid one stops them at the spec phase with exit 3.
func TestWorkdirSpecSandboxCommands(t *testing.T) {
	chdirSpec(t, "schema_version = 1\ncapabilities = [\"crewai\"]\n")
	for _, cmd := range []string{"run", "doctor", "test-sandbox"} {
		t.Run(cmd, func(t *testing.T) {
			code, _, errs := runCLI(t, cmd, "--runs-dir", t.TempDir())
			if code != ExitInvalidSpec || !strings.Contains(errs, "spec: sandbox_spec.toml\n") ||
				!strings.Contains(errs, `unsupported capability "crewai"`) {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			code, _, errs = runCLI(t, cmd, "--quiet", "--runs-dir", t.TempDir())
			if code != ExitInvalidSpec || strings.Contains(errs, "spec: sandbox_spec.toml\n") {
				t.Fatalf("--quiet: exit %d, stderr %q", code, errs)
			}
		})
	}
}

// TestBuiltinSpecNamed: with no file in the working directory the
// commands name the built-in default.
func TestBuiltinSpecNamed(t *testing.T) {
	t.Chdir(t.TempDir())
	code, out, _ := runCLI(t, "spec", "check")
	if code != ExitOK || !strings.HasPrefix(out, "built-in default: ok") {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
}

// TestSpecFileArgument: spec check takes FILE positionally; the flag still
// works; both naming different files is a usage error; a directory is an
// invalid spec named as such, not a read error.
func TestSpecFileArgument(t *testing.T) {
	path := writeSpec(t, "capabilities = [\"shell_access\"]\n")
	other := writeSpec(t, "capabilities = []\n")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"positional", []string{"spec", "check", path}, ExitOK, path + ": ok"},
		{"flag", []string{"spec", "check", "--spec", path}, ExitOK, path + ": ok"},
		{"same twice", []string{"spec", "check", "--spec", path, path}, ExitOK, path + ": ok"},
		{"different", []string{"spec", "check", "--spec", other, path}, ExitUsage, "two specs named"},
		{"directory", []string{"spec", "check", t.TempDir()}, ExitInvalidSpec, "not a regular file"},
		{"resolve positional", []string{"spec", "resolve", path}, ExitOK, "spec:         " + path},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tt.args...)
			if code != tt.code || !strings.Contains(out+errs, tt.want) {
				t.Fatalf("exit %d (want %d), output lacks %q:\n%s%s", code, tt.code, tt.want, out, errs)
			}
		})
	}
}
