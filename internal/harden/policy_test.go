package harden

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func validPolicy() Policy {
	return Policy{
		Schema: Schema,
		Role:   "agent",
		Landlock: Landlock{
			MinABI:         4,
			ReadOnlyDirs:   []string{"/etc"},
			ReadOnlyFiles:  []string{"/etc/passwd"},
			ReadWriteDirs:  []string{"/tmp", "/sandbox-output"},
			ReadWriteFiles: []string{"/dev/null"},
			ExecFiles:      []string{"/mcpsidecar"},
			ConnectTCP:     []uint16{3128, 8000},
			BindTCP:        []uint16{},
		},
		NoSpawn:         true,
		DenyUnixSockets: true,
		BestEffort:      []string{LayerNoUnix},
		GoMaxProcs:      1,
		GoMemLimitBytes: 100 << 20,
	}
}

func TestParsePolicyRoundTrip(t *testing.T) {
	want := validPolicy()
	data, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParsePolicy(data)
	if err != nil {
		t.Fatalf("ParsePolicy: %v", err)
	}
	if diff := cmp.Diff(want, *got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// TestParsePolicyRejects tries each malformed input; the error must name
// the field (or the JSON problem) at fault.
func TestParsePolicyRejects(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*Policy)
		raw     string // used instead of the edited policy when set
		wantSub string
	}{
		{"not JSON", nil, `{"schema":`, "decoding policy JSON"},
		{"unknown field", nil, `{"schema":"mcpsidecar.harden/v1","role":"a","landlock":{},"nospawn":true}`, `unknown field "nospawn"`},
		{"trailing data", nil, `{"schema":"mcpsidecar.harden/v1","role":"a","landlock":{}} {}`, "trailing data"},
		{"wrong type", nil, `{"schema":"mcpsidecar.harden/v1","role":"a","landlock":{"connect_tcp":["80"]}}`, "connect_tcp"},
		{"port out of range", nil, `{"schema":"mcpsidecar.harden/v1","role":"a","landlock":{"bind_tcp":[70000]}}`, "bind_tcp"},
		{"wrong schema", func(p *Policy) { p.Schema = "v0" }, "", `schema: got "v0"`},
		{"no role", func(p *Policy) { p.Role = "" }, "", "role: must not be empty"},
		{"min_abi negative", func(p *Policy) { p.Landlock.MinABI = -1 }, "", "landlock.min_abi: -1"},
		{"min_abi too high", func(p *Policy) { p.Landlock.MinABI = 99 }, "", "landlock.min_abi: 99"},
		{"relative ro dir", func(p *Policy) { p.Landlock.ReadOnlyDirs = []string{"etc"} }, "", `landlock.read_only_dirs[0]: "etc"`},
		{"unclean rw dir", func(p *Policy) { p.Landlock.ReadWriteDirs = []string{"/tmp/../etc"} }, "", `landlock.read_write_dirs[0]: "/tmp/../etc"`},
		{"relative exec file", func(p *Policy) { p.Landlock.ExecFiles = []string{"./mcpsidecar"} }, "", "landlock.exec_files[0]"},
		{"empty ro file", func(p *Policy) { p.Landlock.ReadOnlyFiles = []string{""} }, "", "landlock.read_only_files[0]"},
		{"rw file trailing slash", func(p *Policy) { p.Landlock.ReadWriteFiles = []string{"/dev/null/"} }, "", "landlock.read_write_files[0]"},
		{"connect port 0", func(p *Policy) { p.Landlock.ConnectTCP = []uint16{443, 0} }, "", "landlock.connect_tcp[1]: port 0"},
		{"bind port 0", func(p *Policy) { p.Landlock.BindTCP = []uint16{0} }, "", "landlock.bind_tcp[0]: port 0"},
		{"unknown best-effort layer", func(p *Policy) { p.BestEffort = []string{"landlock"} }, "", `best_effort[0]: unknown layer "landlock"`},
		{"negative gomaxprocs", func(p *Policy) { p.GoMaxProcs = -2 }, "", "gomaxprocs: -2"},
		{"negative gomemlimit", func(p *Policy) { p.GoMemLimitBytes = -1 }, "", "gomemlimit_bytes: -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := []byte(tt.raw)
			if tt.edit != nil {
				p := validPolicy()
				tt.edit(&p)
				var err error
				if raw, err = json.Marshal(p); err != nil {
					t.Fatal(err)
				}
			}
			_, err := ParsePolicy(raw)
			if err == nil {
				t.Fatalf("ParsePolicy accepted %s", raw)
			}
			if !strings.Contains(err.Error(), tt.wantSub) {
				t.Errorf("got error %q, want it to contain %q", err, tt.wantSub)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	p := validPolicy()
	p.Role = ""
	p.GoMaxProcs = -1
	p.Landlock.ConnectTCP = []uint16{0}
	err := p.Validate()
	if err == nil {
		t.Fatal("Validate accepted three problems")
	}
	for _, sub := range []string{"role", "gomaxprocs", "connect_tcp"} {
		if !strings.Contains(err.Error(), sub) {
			t.Errorf("error %q does not mention %s", err, sub)
		}
	}
}

func TestPolicyFromEnv(t *testing.T) {
	valid, err := json.Marshal(validPolicy())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		value   string
		wantOK  bool
		wantErr string
	}{
		{"unset: host use, nothing applied", "", false, ""},
		{"valid", string(valid), true, ""},
		{"malformed is an error, never off", "{", false, EnvPolicy},
		{"invalid is an error", `{"schema":"x","role":"a","landlock":{}}`, false, "schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == EnvPolicy {
					return tt.value
				}
				return ""
			}
			p, ok, err := PolicyFromEnv(getenv)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.wantOK || (p != nil) != tt.wantOK {
				t.Errorf("got ok %v policy %v, want ok %v", ok, p, tt.wantOK)
			}
		})
	}
}

func TestUnavailableErrorMessage(t *testing.T) {
	err := &UnavailableError{Layer: LayerLandlockNet, KernelABI: 3, Reason: "TCP connect/bind rules need Landlock ABI >= 4"}
	want := "hardening layer landlock-net cannot be enforced (kernel Landlock ABI 3): TCP connect/bind rules need Landlock ABI >= 4"
	if got := err.Error(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// FuzzParsePolicy: no input panics, and whatever is accepted validates
// and survives a round trip.
func FuzzParsePolicy(f *testing.F) {
	valid, _ := json.Marshal(validPolicy())
	f.Add(valid)
	f.Add([]byte(`{"schema":"mcpsidecar.harden/v1","role":"a","landlock":{"read_only_dirs":["/etc/../x"]}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted policy does not validate: %v", err)
		}
		again, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParsePolicy(again); err != nil {
			t.Fatalf("round trip of an accepted policy fails: %v", err)
		}
	})
}
