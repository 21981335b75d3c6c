package spec

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

// golden compares got with the file at path, or rewrites it with -update
// (internal/testutil).
func golden(t *testing.T, path string, got []byte) { t.Helper(); testutil.Golden(t, path, got) }

// TestInvalidSpecs loads one file per failure mode; the golden file next
// to it holds every expected problem line.
func TestInvalidSpecs(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no invalid specs: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := LoadFile(f)
			var probs *Problems
			if !errors.As(err, &probs) || len(probs.List) == 0 {
				t.Fatalf("LoadFile = %+v, %v; want *Problems", s, err)
			}
			for _, p := range probs.List {
				if p.File != f || p.Line == 0 || p.Message == "" {
					t.Errorf("problem lacks file, line or message: %+v", p)
				}
			}
			golden(t, strings.TrimSuffix(f, ".toml")+".golden", []byte(err.Error()+"\n"))
		})
	}
}

func TestLoadFileMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.toml")
	_, err := LoadFile(path)
	want := path + ": spec file does not exist"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestLoadTooLarge(t *testing.T) {
	data := []byte("schema_version = 1\n#" + strings.Repeat("x", maxSpecBytes) + "\n")
	_, err := Load("big.toml", data)
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("got %v, want a size problem", err)
	}
}

func TestProblemsSortedByPosition(t *testing.T) {
	_, err := LoadFile("testdata/invalid/many_problems.toml")
	var probs *Problems
	if !errors.As(err, &probs) {
		t.Fatalf("got %v", err)
	}
	if len(probs.List) < 8 {
		t.Fatalf("got %d problems, want every one of at least 8:\n%v", len(probs.List), err)
	}
	for i := 1; i < len(probs.List); i++ {
		a, b := probs.List[i-1], probs.List[i]
		if a.Line > b.Line || a.Line == b.Line && a.Col > b.Col {
			t.Errorf("problem %d (%d:%d) before %d (%d:%d)", i-1, a.Line, a.Col, i, b.Line, b.Col)
		}
	}
}

func TestLoadValid(t *testing.T) {
	tests := []struct {
		file string
		want Spec
	}{
		{"empty", Spec{SchemaVersion: 1}},
		{"seed_mcpsidecar", Spec{SchemaVersion: 1,
			Capabilities:   []string{"network", "mcp_client", "openai_agents"},
			AllowedDomains: []string{".example.com", ".gov.uk", ".microsoft.com"}, AllowedIPs: []string{}}},
		{"shell_access", Spec{SchemaVersion: 1, Capabilities: []string{"shell_access"}}},
		{"inline_env", Spec{SchemaVersion: 1, Env: []EnvVar{{Name: "A", Value: "1"}, {Name: "B", FromHost: true}}}},
		{"env_vars", Spec{SchemaVersion: 1, Capabilities: []string{"network", "openai_agents"}, Env: []EnvVar{
			{Name: "ZED", Value: "last"}, {Name: "MY_TOKEN", FromHost: true},
			{Name: "HOME", Value: "/overridden-by-harness"}, {Name: "GREETING", Value: "h\u00e9llo \U0001F600 <&>"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := "testdata/valid/" + tt.file + ".toml"
			got, err := LoadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Source = path
			if diff := cmp.Diff(&tt.want, got, cmpSpec); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// cmpSpec treats nil and empty lists alike: both mean "none written".
var cmpSpec = cmp.Transformer("nilToEmpty", func(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
})

func TestDefaultIsSeedSpec(t *testing.T) {
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	_, hash, err := Normalize(s)
	if err != nil {
		t.Fatal(err)
	}
	// The seed's algorithm gives 9d0d772f10f036c6
	// for the McpSidecar README spec.
	if hash != "9d0d772f10f036c6" {
		t.Fatalf("hash %s, want the seed's 9d0d772f10f036c6", hash)
	}
}

func TestNormalizeMatchesPython(t *testing.T) {
	s := &Spec{SchemaVersion: 1, Capabilities: []string{}, AllowedDomains: []string{"a/b"}, AllowedIPs: []string{},
		Env: []EnvVar{{Name: "Z", Value: "\"\\\n\t\x01\x7f<&>é😀"}, {Name: "A", FromHost: true}}}
	got, _, err := Normalize(s)
	if err != nil {
		t.Fatal(err)
	}
	// json.dumps(d, sort_keys=True, separators=(",", ":")) in CPython 3.12.
	want := `{"allowed_domains":["a/b"],"allowed_ip_addresses":[],"capabilities":[],` +
		`"environment_variables":[{"from_host":true,"name":"A"},{"name":"Z","value":"\"\\\n\t\u0001\u007f<&>\u00e9\ud83d\ude00"}],"schema_version":1}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestHostBitsWarning: an IP entry with host bits is accepted as its
// network (the seed's ip_network(strict=False)) and warned about, naming
// the entry and where it is.
func TestHostBitsWarning(t *testing.T) {
	s, err := LoadFile("testdata/valid/ports.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`testdata/valid/ports.toml:5:64: allowed_ip_addresses[2]: "10.1.2.3/8" has host bits set below its mask; read as the network 10.0.0.0/8`}
	var got []string
	for _, w := range s.Warnings {
		got = append(got, w.String())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if s, err := LoadFile("testdata/valid/seed_mcpsidecar.toml"); err != nil || len(s.Warnings) != 0 {
		t.Errorf("seed spec: %v, warnings %v", err, s.Warnings)
	}
}
