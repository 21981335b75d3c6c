package dockerx

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/container"
)

func fullSpec() ContainerSpec {
	return ContainerSpec{
		Name: "sandbox-agent-run-1", Image: "mcpsidecar:abc", Cmd: []string{"agent"},
		Env:  []EnvVar{{Name: "A", Value: "1"}, {Name: "OPENAI_API_KEY", Value: "sk-secret", Secret: true}},
		User: "65532:65532", Labels: map[string]string{"mcpsidecar": "1"},
		Networks:       []Attachment{{Network: "net-egress", Aliases: []string{}}, {Network: "net-internal", Aliases: []string{"egress-gateway"}}},
		ReadOnlyRootfs: true, CapDrop: []string{"ALL"}, CapAdd: []string{},
		NoNewPrivileges: true, Seccomp: "{}",
		Tmpfs:  map[string]string{"/tmp": "rw,noexec"},
		Mounts: []Mount{{Source: "/runs/r/agent", Target: "/sandbox-output"}, {Source: "/fx", Target: "/sandbox-denied", ReadOnly: true}},
		Init:   true, CgroupnsPrivate: true, PidsLimit: 64, MemoryBytes: 1 << 28, MemorySwapBytes: 1 << 28, NanoCPUs: 1e9,
		Ulimits: []Ulimit{{Name: "nofile", Soft: 256, Hard: 512}},
		Sysctls: map[string]string{"net.ipv4.ip_unprivileged_port_start": "1024"},
		DNS:     []string{"0.0.0.0"}, DNSOptions: []string{"attempts:1"},
		ExtraHosts: []string{"host.docker.internal:0.0.0.0"}, MaskedPaths: []string{"/proc/acpi"},
	}
}

func TestTranslate(t *testing.T) {
	cfg, host, net, err := translate(fullSpec())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"A=1", "OPENAI_API_KEY=sk-secret"}, cfg.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if cfg.User != "65532:65532" || cfg.Image != "mcpsidecar:abc" || cfg.Labels["mcpsidecar"] != "1" {
		t.Errorf("config %+v", cfg)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"network mode", string(host.NetworkMode), "net-egress"},
		{"binds", host.Binds, []string{"/runs/r/agent:/sandbox-output:rw", "/fx:/sandbox-denied:ro"}},
		{"read-only", host.ReadonlyRootfs, true},
		{"cap drop", host.CapDrop, []string{"ALL"}},
		{"security opt", host.SecurityOpt, []string{"no-new-privileges:true", "seccomp={}"}},
		{"tmpfs", host.Tmpfs, map[string]string{"/tmp": "rw,noexec"}},
		{"init", *host.Init, true},
		{"cgroupns", host.CgroupnsMode, container.CgroupnsModePrivate},
		{"pids", *host.PidsLimit, int64(64)},
		{"memory", host.Memory, int64(1 << 28)},
		{"swap", host.MemorySwap, int64(1 << 28)},
		{"cpus", host.NanoCPUs, int64(1e9)},
		{"ulimits", *host.Ulimits[0], container.Ulimit{Name: "nofile", Soft: 256, Hard: 512}},
		{"sysctls", host.Sysctls, map[string]string{"net.ipv4.ip_unprivileged_port_start": "1024"}},
		{"dns", host.DNS, []netip.Addr{netip.MustParseAddr("0.0.0.0")}},
		{"dns options", host.DNSOptions, []string{"attempts:1"}},
		{"extra hosts", host.ExtraHosts, []string{"host.docker.internal:0.0.0.0"}},
		{"masked", host.MaskedPaths, []string{"/proc/acpi"}},
		{"first network only", len(net.EndpointsConfig), 1},
		{"aliases", net.EndpointsConfig["net-egress"].Aliases, []string{}},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, c.got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestTranslateFixedAddress: an attachment's fixed address is the
// endpoint's IPAM address; none leaves the choice to the engine.
func TestTranslateFixedAddress(t *testing.T) {
	s := fullSpec()
	s.Networks[0].IPv4 = "10.213.4.2"
	_, _, net, err := translate(s)
	if err != nil {
		t.Fatal(err)
	}
	ep := net.EndpointsConfig["net-egress"]
	if ep.IPAMConfig == nil || ep.IPAMConfig.IPv4Address != netip.MustParseAddr("10.213.4.2") {
		t.Errorf("endpoint IPAM %+v, want 10.213.4.2", ep.IPAMConfig)
	}
	if _, _, net, _ := translate(fullSpec()); net.EndpointsConfig["net-egress"].IPAMConfig != nil {
		t.Errorf("an address was set without one asked for")
	}
	if ep, err := endpoint("c", Attachment{Network: "n", IPv4: "10.213.4.18"}); err != nil || ep.IPAMConfig.IPv4Address != netip.MustParseAddr("10.213.4.18") {
		t.Errorf("second network's endpoint %+v, %v", ep, err)
	}
}

func TestTranslateNetworkNone(t *testing.T) {
	s := fullSpec()
	s.Networks = []Attachment{{Network: "none"}}
	_, host, net, err := translate(s)
	if err != nil {
		t.Fatal(err)
	}
	if host.NetworkMode != "none" || net != nil {
		t.Errorf("network mode %q, networking config %v; want none and nil", host.NetworkMode, net)
	}
}

func TestTranslateRejects(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*ContainerSpec)
		wantErr string
	}{
		{"no network", func(s *ContainerSpec) { s.Networks = nil }, "no network given"},
		{"bad dns", func(s *ContainerSpec) { s.DNS = []string{"resolver.example"} }, `dns server "resolver.example"`},
		{"colon in source", func(s *ContainerSpec) { s.Mounts[0].Source = "/runs/a:b" }, "contains ':' or ','"},
		{"comma in target", func(s *ContainerSpec) { s.Mounts[0].Target = "/out,ro" }, "contains ':' or ','"},
		{"bad address", func(s *ContainerSpec) { s.Networks[0].IPv4 = "10.0.0.300" }, `address "10.0.0.300" on network net-egress`},
		{"IPv6 address", func(s *ContainerSpec) { s.Networks[1].IPv4 = "fd00::2" }, `address "fd00::2" on network net-internal: want an IPv4 address`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fullSpec()
			tt.mutate(&s)
			_, _, _, err := translate(s)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestEnvVarRedactsSecrets(t *testing.T) {
	b, err := json.Marshal(fullSpec())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "sk-secret") {
		t.Errorf("secret serialised: %s", b)
	}
	var got struct {
		Env []struct{ Name, Value string }
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Env) != 2 || got.Env[1].Value != Redacted || got.Env[0].Value != "1" {
		t.Errorf("env serialised as %+v, want the secret as %s and the rest intact", got.Env, Redacted)
	}
}

func TestReadJSONMessages(t *testing.T) {
	tests := []struct {
		name, stream, wantErr string
	}{
		{"ok", `{"stream":"Step 1/4"}` + "\n" + `{"stream":"Successfully built"}`, ""},
		{"error detail", `{"stream":"Step 1"}{"errorDetail":{"message":"COPY failed: no such file"},"error":"COPY failed"}`, "COPY failed: no such file"},
		{"bare error", `{"error":"no builder"}`, "no builder"},
		{"garbage", `{"stream":`, "reading engine progress"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := readJSONMessages(strings.NewReader(tt.stream))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestTarParents(t *testing.T) {
	b, err := Tar([]File{{Name: "etc/ssl/certs/ca.crt", Mode: 0o644, Data: []byte("x")}, {Name: "etc/passwd", Mode: 0o644}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"etc/", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca.crt", "etc/passwd"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("tar lacks %s", want)
		}
	}
}

// TestVolumeMountsNoCopy: an engine volume is mounted nocopy (the image's
// files at the target never fill it: red team, session 37, a planted
// release file), a host path as it is.
func TestVolumeMountsNoCopy(t *testing.T) {
	s := fullSpec()
	s.Mounts = []Mount{{Source: "mcpsidecar-out-run-x-agent", Target: "/sandbox-output"}, {Source: "/runs/r/sidecar", Target: "/out"},
		{Source: "mcpsidecar-launcher-run-x", Target: "/.mcpsidecar", ReadOnly: true}}
	_, h, _, err := translate(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"mcpsidecar-out-run-x-agent:/sandbox-output:rw,nocopy", "/runs/r/sidecar:/out:rw", "mcpsidecar-launcher-run-x:/.mcpsidecar:ro,nocopy"}
	if !slices.Equal(h.Binds, want) {
		t.Errorf("binds %q, want %q", h.Binds, want)
	}
}
