package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(context.Background(), args, Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

func writeSpec(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sandbox_spec.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSpecCheck(t *testing.T) {
	bad := writeSpec(t, "schema_version = 2\ncapabilities = [\"mcp_client\", \"crewai\"]\n")
	tests := []struct {
		name     string
		args     []string
		code     int
		out, err []string
	}{
		{"default", []string{"spec", "check"}, ExitOK, []string{"built-in default: ok", "gateway, sidecar, agent"}, nil},
		{"invalid", []string{"spec", "check", "--spec", bad}, ExitInvalidSpec, nil, []string{
			bad + ":1:18: schema_version: unsupported schema_version 2",
			bad + `:2:17: capabilities[0]: capability "mcp_client" requires the network capability`,
			bad + `:2:31: capabilities[1]: unsupported capability "crewai"`,
			"mcpsidecar: invalid spec: 3 problem(s)"}},
		{"missing", []string{"spec", "check", "--spec", "/nonexistent/spec.toml"}, ExitInvalidSpec, nil, []string{"/nonexistent/spec.toml: spec file does not exist"}},
		{"bad flag", []string{"spec", "check", "--nope"}, ExitUsage, nil, []string{"unknown flag"}},
		{"two args", []string{"spec", "check", "x", "y"}, ExitUsage, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errs)
			}
			for _, w := range tt.out {
				if !strings.Contains(out, w) {
					t.Errorf("stdout %q lacks %q", out, w)
				}
			}
			for _, w := range tt.err {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q lacks %q", errs, w)
				}
			}
		})
	}
}

// TestSpecDefaultRoundTrip: the printed default spec, saved to a file,
// checks clean and resolves to the same hash as the built-in one.
func TestSpecDefaultRoundTrip(t *testing.T) {
	code, out, errs := runCLI(t, "spec", "default")
	if code != ExitOK || !strings.Contains(out, "schema_version = 1") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	path := writeSpec(t, out)
	_, fromFile, _ := runCLI(t, "spec", "resolve", "--spec", path)
	_, builtin, _ := runCLI(t, "spec", "resolve")
	hash := func(summary string) string {
		_, after, _ := strings.Cut(summary, "(hash ")
		h, _, _ := strings.Cut(after, ")")
		return h
	}
	if hash(fromFile) == "" || hash(fromFile) != hash(builtin) {
		t.Fatalf("hash from file %q, built-in %q", hash(fromFile), hash(builtin))
	}
}

func TestSpecCheckJSON(t *testing.T) {
	bad := writeSpec(t, "capabilities = [\"network\", \"network\"]\nEgress = 1\n")
	tests := []struct {
		name     string
		args     []string
		code     int
		problems []string
	}{
		{"default", []string{"spec", "check", "--json"}, ExitOK, []string{}},
		{"invalid", []string{"spec", "check", "--json", "--spec", bad}, ExitInvalidSpec, []string{"capabilities[1]", "Egress"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d: %s", code, tt.code, errs)
			}
			var res checkResult
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, out)
			}
			var keys []string
			for _, p := range res.Problems {
				keys = append(keys, p.Key)
			}
			if res.OK != (tt.code == ExitOK) || !slices.Equal(keys, tt.problems) {
				t.Errorf("ok %v, problem keys %q; want %q", res.OK, keys, tt.problems)
			}
		})
	}
}

func TestSpecResolveOut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	code, out, errs := runCLI(t, "spec", "resolve", "--out", dir)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := []string{spec.FileDockerfile, spec.FileGatewayPolicy, spec.FileLandlock, spec.FileProfile,
		spec.FileSpec, spec.FileSeccomp, spec.FileLedger, spec.FileSquidConf}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("wrote %v, want %v", got, want)
	}
	if !strings.Contains(out, "softening ledger:") || !strings.Contains(out, ".openai.com") {
		t.Errorf("summary lacks the ledger: %s", out)
	}
	var prof spec.Profile
	data, _ := os.ReadFile(filepath.Join(dir, spec.FileProfile))
	if err := json.Unmarshal(data, &prof); err != nil || prof.Schema != spec.ProfileSchema {
		t.Fatalf("resolved-profile.json: %v %q", err, prof.Schema)
	}
}

func TestSpecResolveJSON(t *testing.T) {
	path := writeSpec(t, "capabilities = [\"shell_access\"]\n")
	code, out, errs := runCLI(t, "spec", "resolve", "--spec", path, "--json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var prof spec.Profile
	if err := json.Unmarshal([]byte(out), &prof); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(prof.Roles, []string{spec.RoleAgent}) || prof.Containers[spec.RoleAgent].Harden.NoSpawn {
		t.Fatalf("roles %v, no_spawn %v", prof.Roles, prof.Containers[spec.RoleAgent].Harden.NoSpawn)
	}
}

// TestSpecResolveRefusesLinks plants links where the artifacts go: the
// write must fail and the link target stay untouched.
func TestSpecResolveRefusesLinks(t *testing.T) {
	base := t.TempDir()
	victim := filepath.Join(base, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	fileLink := filepath.Join(base, "withlink")
	if err := os.Mkdir(fileLink, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(fileLink, spec.FileDockerfile)); err != nil {
		t.Fatal(err)
	}
	dirLink := filepath.Join(base, "dirlink")
	if err := os.Symlink(t.TempDir(), dirLink); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{fileLink, dirLink} {
		t.Run(filepath.Base(out), func(t *testing.T) {
			code, _, errs := runCLI(t, "spec", "resolve", "--out", out)
			if code == ExitOK || !strings.Contains(errs, out) {
				t.Fatalf("exit %d, stderr %q; want a refusal naming %s", code, errs, out)
			}
		})
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("link target overwritten: %q", b)
	}
}

// A network written with host bits is accepted as the seed accepted it,
// normalised, and said as a warning (text and JSON).
func TestSpecCheckWarnsHostBits(t *testing.T) {
	path := writeSpec(t, "schema_version = 1\ncapabilities = [\"network\"]\nallowed_ip_addresses = [\"10.1.2.3/8\"]\n")
	code, out, errs := runCLI(t, "spec", "check", "--spec", path)
	if code != ExitOK || !strings.Contains(out, ": ok") || !strings.Contains(errs, "warning: ") || !strings.Contains(errs, "10.0.0.0/8") {
		t.Fatalf("spec check = %d\nstdout %s\nstderr %s", code, out, errs)
	}
	code, out, _ = runCLI(t, "spec", "check", "--json", "--spec", path)
	var res checkResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != ExitOK || !res.OK || len(res.Warnings) != 1 {
		t.Fatalf("spec check --json = %d %+v (%v)", code, res, err)
	}
}
