package spec

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

func resolveFile(t *testing.T, path string) *Profile {
	t.Helper()
	s, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Resolve(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestResolvedArtifacts compares every artifact of every valid spec with
// its golden file (testdata/golden/<spec>/<artifact>).
func TestResolvedArtifacts(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.toml")
	if len(files) == 0 {
		t.Fatal("no valid specs")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".toml")
		t.Run(name, func(t *testing.T) {
			arts, err := Artifacts(resolveFile(t, f))
			if err != nil {
				t.Fatal(err)
			}
			for art, data := range arts {
				if art == FileSeccomp || art == FileDockerfile {
					continue // the same for every spec: checked once below
				}
				golden(t, filepath.Join("testdata/golden", name, art), data)
			}
		})
	}
	p := resolveFile(t, "testdata/valid/seed_mcpsidecar.toml")
	golden(t, "testdata/golden/"+FileSeccomp, p.SeccompProfile)
	golden(t, "testdata/golden/"+FileDockerfile, []byte(p.Dockerfile))
}

func TestRolesByCapability(t *testing.T) {
	tests := []struct {
		caps      []string
		roles     []string
		noSpawn   bool
		networks  []string
		forward   []string
		sidecarOK bool
	}{
		{nil, []string{RoleAgent}, true, []string{}, []string{}, false},
		{[]string{CapShellAccess}, []string{RoleAgent}, false, []string{}, []string{}, false},
		{[]string{CapNetwork}, []string{RoleGateway, RoleAgent}, true, []string{NetInternal}, []string{}, false},
		{[]string{CapNetwork, CapMCPClient}, []string{RoleGateway, RoleSidecar, RoleAgent}, true, []string{NetInternal}, []string{}, true},
		{[]string{CapNetwork, CapOpenAIAgents}, []string{RoleGateway, RoleAgent}, true, []string{NetInternal}, []string{"OPENAI_MODEL"}, false},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.caps, "+"), func(t *testing.T) {
			p, err := Resolve(&Spec{SchemaVersion: 1, Capabilities: tt.caps})
			if err != nil {
				t.Fatal(err)
			}
			agent := p.Containers[RoleAgent]
			got := []any{p.Roles, agent.Harden.NoSpawn, agent.Networks, agent.ForwardEnv, agent.Env[EnvSidecarURL] == SidecarURL}
			want := []any{tt.roles, tt.noSpawn, tt.networks, tt.forward, tt.sidecarOK}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if (p.Gateway != nil) != slices.Contains(tt.caps, CapNetwork) || (p.SquidConf != "") != (p.Gateway != nil) {
				t.Errorf("gateway policy present = %v for caps %v", p.Gateway != nil, tt.caps)
			}
		})
	}
}

// TestEveryContainerHardened checks the baseline no capability may lift.
func TestEveryContainerHardened(t *testing.T) {
	p := resolveFile(t, "testdata/valid/seed_mcpsidecar.toml")
	for _, role := range append(slices.Clone(p.Roles), RoleProbe) {
		c := p.Containers[role]
		if role == RoleProbe {
			c = p.Probe()
		}
		t.Run(role, func(t *testing.T) {
			switch {
			case c.User != User || !c.ReadonlyRootfs || !slices.Equal(c.CapDrop, []string{"ALL"}) || len(c.CapAdd) != 0:
				t.Errorf("user/rootfs/caps: %q %v %v %v", c.User, c.ReadonlyRootfs, c.CapDrop, c.CapAdd)
			case len(c.SecurityOpt) != 2 || c.SecurityOpt[0] != "no-new-privileges:true" || !strings.HasPrefix(c.SecurityOpt[1], "seccomp={"):
				t.Errorf("security options: %.80q", c.SecurityOpt)
			case c.Memory == 0 || c.MemorySwap != c.Memory || c.PidsLimit == 0 || c.NanoCPUs == 0 || len(c.Ulimits) != 3:
				t.Errorf("limits: %+v", c)
			case c.CgroupnsMode != "private" || c.Sysctls["net.ipv4.ip_unprivileged_port_start"] != "1024":
				t.Errorf("cgroupns/sysctls: %q %v", c.CgroupnsMode, c.Sysctls)
			case !slices.Contains(c.MaskedPaths, "/proc/acpi") || !slices.Contains(c.MaskedPaths, "/sys/firmware"):
				t.Errorf("masked paths: %v", c.MaskedPaths)
			case !slices.Contains(c.ExtraHosts, "metadata.google.internal:0.0.0.0"):
				t.Errorf("extra hosts: %v", c.ExtraHosts)
			}
			for path, opts := range c.Tmpfs {
				if !strings.Contains(opts, "noexec,nosuid,nodev") {
					t.Errorf("tmpfs %s: %q", path, opts)
				}
			}
			var hp harden.Policy
			if err := json.Unmarshal([]byte(c.Env[EnvHardenPolicy]), &hp); err != nil {
				t.Fatalf("harden policy env: %v", err)
			}
			if diff := cmp.Diff(c.Harden, hp); diff != "" || hp.Role != role || !hp.NoSpawn {
				t.Errorf("harden policy env (role %q, no_spawn %v) mismatch (-want +got):\n%s", hp.Role, hp.NoSpawn, diff)
			}
		})
	}
}

func TestGatewayEnvPolicyCompiles(t *testing.T) {
	p := resolveFile(t, "testdata/valid/network_only.toml")
	var cfg netpolicy.Config
	if err := json.Unmarshal([]byte(p.Containers[RoleGateway].Env[EnvGatewayPolicy]), &cfg); err != nil {
		t.Fatal(err)
	}
	pol, err := netpolicy.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]string{"example.com": ".example.com", "api.example.com": ".example.com", "xn--bcher-kva.example": "xn--bcher-kva.example"} {
		if got, ok := pol.MatchName(host); !ok || got != want {
			t.Errorf("MatchName(%q) = %q, %v; want %q", host, got, ok, want)
		}
	}
}

func TestGatewayConfigDropsCoveredRules(t *testing.T) {
	tests := []struct {
		in   []string
		want []string
	}{
		{[]string{"*.Example.com", "example.com", "api.example.com", ".a.example.com"}, []string{".example.com"}},
		{[]string{"example.com", ".example.com"}, []string{".example.com"}},
		{[]string{"a.example.com", "b.example.com", "a.example.com."}, []string{"a.example.com", "b.example.com"}},
		{[]string{".gov.uk", ".microsoft.com", ".gov.uk"}, []string{".gov.uk", ".microsoft.com"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.in, ","), func(t *testing.T) {
			cfg, err := GatewayConfig(tt.in, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, cfg.AllowedDomains); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAgentEnvHarnessWins(t *testing.T) {
	p := resolveFile(t, "testdata/valid/env_vars.toml")
	a := p.Containers[RoleAgent]
	want := map[string]string{"HOME": "/tmp", "ZED": "last", "GREETING": "h\u00e9llo \U0001F600 <&>"}
	for k, v := range want {
		if a.Env[k] != v {
			t.Errorf("Env[%s] = %q, want %q", k, a.Env[k], v)
		}
	}
	if diff := cmp.Diff([]string{"MY_TOKEN", "OPENAI_MODEL"}, a.ForwardEnv); diff != "" {
		t.Errorf("ForwardEnv mismatch (-want +got):\n%s", diff)
	}
}

func TestLedgerNamesEveryCapability(t *testing.T) {
	p, err := Resolve(&Spec{SchemaVersion: 1, Capabilities: []string{CapNetwork, CapMCPClient, CapOpenAIAgents, CapShellAccess}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Supported {
		if !slices.ContainsFunc(p.Ledger, func(s Softening) bool { return s.Capability == c }) {
			t.Errorf("ledger has no entry for %s", c)
		}
	}
	none, _ := Resolve(&Spec{SchemaVersion: 1})
	if len(none.Ledger) != 0 {
		t.Errorf("no capabilities, but ledger %v", none.Ledger)
	}
}

// Only the gateway, and only with an entry naming a port, gets the Docker
// host's address for host.docker.internal; the others keep it black-holed.
func TestHostGatewayOnlyForTheGateway(t *testing.T) {
	for _, tt := range []struct {
		domains string
		want    string
	}{
		{`["host.docker.internal:11434"]`, "host.docker.internal:host-gateway"},
		{`["models.lan:11434"]`, "host.docker.internal:0.0.0.0"},
	} {
		s, err := Load("t.toml", []byte("schema_version = 1\ncapabilities = [\"network\"]\nallowed_domains = "+tt.domains+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Resolve(s)
		if err != nil {
			t.Fatal(err)
		}
		for role, c := range p.Containers {
			want := "host.docker.internal:0.0.0.0"
			if role == RoleGateway {
				want = tt.want
			}
			if !slices.Contains(c.ExtraHosts, want) {
				t.Errorf("%s with %s: ExtraHosts %v, want %s", role, tt.domains, c.ExtraHosts, want)
			}
		}
	}
}
