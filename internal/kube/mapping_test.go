package kube

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/plan"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

const (
	testRunID    = "run-2026-01-02-03-04-05"
	ourImage     = "mcpsidecar:0123456789abcdef"
	testLauncher = "/.mcpsidecar/mcpsidecar" // sandbox.LauncherPath
	sidecarIP    = "10.96.0.10"
	gatewayIP    = "10.96.0.11"
	// hostGatewayIP stands for the Docker host in the ports spec.
	hostGatewayIP = "10.0.0.1"
)

func loadSpec(t *testing.T, name string) *spec.Spec {
	t.Helper()
	if name == "default" {
		s, err := spec.Default()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	path := filepath.Join("testdata", "specs", name+".toml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(path, b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// input builds the plan the Docker backend would run for the spec, then
// the mapping's input, as the client would give it.
func input(t *testing.T, specName string, w orchestrate.Workload) Input {
	t.Helper()
	s := loadSpec(t, specName)
	p, err := spec.Resolve(s)
	if err != nil {
		t.Fatalf("resolving %s: %v", specName, err)
	}
	plan, err := orchestrate.NewPlan(orchestrate.Input{
		Profile: p, RunID: testRunID, RunDir: "/runs/" + testRunID, Image: ourImage, Workload: w,
		Env: map[string][]plan.EnvVar{orchestrate.RoleAgent: {
			{Name: "OPENAI_API_KEY", Value: "sk-test-secret", Secret: true},
			{Name: orchestrate.EnvQuestion, Value: "why?"},
		}},
		Owner: orchestrate.Owner{PID: 4242, Host: "builder"}, Token: "a1b2c3",
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Workload != nil {
		own(&plan, s.Workload)
	}
	in := Input{
		Plan: plan, Profile: p, RuntimeImage: ourImage, Token: "a1b2c3", LauncherPath: testLauncher,
		ServiceIPs: map[string]string{spec.SidecarAlias: sidecarIP, spec.GatewayAlias: gatewayIP},
	}
	if specName == "ports" { // host.docker.internal:11434
		in.HostGatewayIP = hostGatewayIP
	}
	return in
}

// own makes the agent step run a user's workload the way the lifecycle
// does (internal/sandbox applyOwn): the image, the launcher as entrypoint,
// the command, the launcher mounted read-only.
func own(p *orchestrate.Plan, w *spec.Workload) {
	i := slices.IndexFunc(p.Containers, func(st orchestrate.Step) bool { return st.Role == orchestrate.RoleAgent })
	st := &p.Containers[i]
	st.Spec.Image = w.Image
	st.Spec.Entrypoint = []string{testLauncher, "launch", "--"}
	st.Spec.Cmd = slices.Clone(w.Command)
	st.Spec.Mounts = append(st.Spec.Mounts, plan.Mount{Source: "/usr/local/bin/mcpsidecar", Target: testLauncher, ReadOnly: true})
	st.Spec.NoHealthcheck = true
}

func TestObjectsGolden(t *testing.T) {
	for _, tt := range []struct {
		name, spec string
		workload   orchestrate.Workload
	}{
		{"default", "default", orchestrate.WorkloadAgent},
		{"shell_access", "shell_access", orchestrate.WorkloadAgent},
		{"workload", "workload", orchestrate.WorkloadAgent},
		{"mcp_servers", "mcp_servers", orchestrate.WorkloadAgent},
		{"ports", "ports", orchestrate.WorkloadAgent},
		{"no_network", "no_network", orchestrate.WorkloadAgent},
		{"doctor", "default", orchestrate.WorkloadCheck},
		{"test-sandbox", "default", orchestrate.WorkloadProbe},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set, err := Objects(input(t, tt.spec, tt.workload))
			if err != nil {
				t.Fatal(err)
			}
			y, err := set.YAML()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(y), "sk-test-secret") {
				t.Fatal("a secret value is in the YAML")
			}
			testutil.Golden(t, filepath.Join("testdata", "objects-"+tt.name+".yaml"), y)
		})
	}
}

// TestHardening checks each hardening field on every pod of several
// runs; each row fails if the mapping drops its field.
func TestHardening(t *testing.T) {
	type check struct {
		name string
		ok   func(p *corev1.Pod, c corev1.Container) bool
	}
	sc := func(c corev1.Container) *corev1.SecurityContext {
		if c.SecurityContext == nil {
			return &corev1.SecurityContext{}
		}
		return c.SecurityContext
	}
	isTrue := func(b *bool) bool { return b != nil && *b }
	isFalse := func(b *bool) bool { return b != nil && !*b }
	checks := []check{
		{"automountServiceAccountToken false", func(p *corev1.Pod, _ corev1.Container) bool { return isFalse(p.Spec.AutomountServiceAccountToken) }},
		{"enableServiceLinks false", func(p *corev1.Pod, _ corev1.Container) bool { return isFalse(p.Spec.EnableServiceLinks) }},
		{"restartPolicy Never", func(p *corev1.Pod, _ corev1.Container) bool { return p.Spec.RestartPolicy == corev1.RestartPolicyNever }},
		{"no host namespaces", func(p *corev1.Pod, _ corev1.Container) bool {
			return !p.Spec.HostNetwork && !p.Spec.HostPID && !p.Spec.HostIPC
		}},
		{"pod runAsNonRoot", func(p *corev1.Pod, _ corev1.Container) bool {
			return p.Spec.SecurityContext != nil && isTrue(p.Spec.SecurityContext.RunAsNonRoot)
		}},
		{"pod seccomp Localhost", func(p *corev1.Pod, _ corev1.Container) bool {
			s := p.Spec.SecurityContext.SeccompProfile
			return s != nil && s.Type == corev1.SeccompProfileTypeLocalhost && strings.HasPrefix(*s.LocalhostProfile, SeccompDir+"/seccomp-")
		}},
		{"sysctl ip_unprivileged_port_start", func(p *corev1.Pod, _ corev1.Container) bool {
			return slices.Contains(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: "net.ipv4.ip_unprivileged_port_start", Value: "1024"})
		}},
		{"sysctl tcp_fastopen", func(p *corev1.Pod, _ corev1.Container) bool {
			return slices.Contains(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: "net.ipv4.tcp_fastopen", Value: "0"})
		}},
		{"black-holed metadata name", func(p *corev1.Pod, _ corev1.Container) bool {
			return slices.ContainsFunc(p.Spec.HostAliases, func(h corev1.HostAlias) bool {
				return h.IP == "0.0.0.0" && slices.Contains(h.Hostnames, "metadata.google.internal")
			})
		}},
		{"runAsNonRoot", func(_ *corev1.Pod, c corev1.Container) bool { return isTrue(sc(c).RunAsNonRoot) }},
		{"runAsUser 65532", func(_ *corev1.Pod, c corev1.Container) bool {
			return sc(c).RunAsUser != nil && *sc(c).RunAsUser == 65532
		}},
		{"runAsGroup 65532", func(_ *corev1.Pod, c corev1.Container) bool {
			return sc(c).RunAsGroup != nil && *sc(c).RunAsGroup == 65532
		}},
		{"readOnlyRootFilesystem", func(_ *corev1.Pod, c corev1.Container) bool { return isTrue(sc(c).ReadOnlyRootFilesystem) }},
		{"allowPrivilegeEscalation false", func(_ *corev1.Pod, c corev1.Container) bool { return isFalse(sc(c).AllowPrivilegeEscalation) }},
		{"privileged false", func(_ *corev1.Pod, c corev1.Container) bool { return isFalse(sc(c).Privileged) }},
		{"drop ALL", func(_ *corev1.Pod, c corev1.Container) bool {
			return sc(c).Capabilities != nil && slices.Equal(sc(c).Capabilities.Drop, []corev1.Capability{"ALL"})
		}},
		{"no capability added", func(_ *corev1.Pod, c corev1.Container) bool {
			return sc(c).Capabilities != nil && len(sc(c).Capabilities.Add) == 0
		}},
		{"container seccomp Localhost", func(_ *corev1.Pod, c corev1.Container) bool {
			s := sc(c).SeccompProfile
			return s != nil && s.Type == corev1.SeccompProfileTypeLocalhost
		}},
		{"memory limit", func(_ *corev1.Pod, c corev1.Container) bool { return !c.Resources.Limits.Memory().IsZero() }},
		{"cpu limit", func(_ *corev1.Pod, c corev1.Container) bool { return !c.Resources.Limits.Cpu().IsZero() }},
		{"memory request equals limit", func(_ *corev1.Pod, c corev1.Container) bool {
			return c.Resources.Requests.Memory().Cmp(*c.Resources.Limits.Memory()) == 0
		}},
		{"/tmp is a memory emptyDir with a size", func(p *corev1.Pod, c corev1.Container) bool { return memoryVolumeAt(p, c, "/tmp") }},
		{"/sandbox-work is a memory emptyDir with a size", func(p *corev1.Pod, c corev1.Container) bool { return memoryVolumeAt(p, c, spec.WorkDir) }},
		{"output emptyDir", func(_ *corev1.Pod, c corev1.Container) bool {
			return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == spec.OutputDir && m.Name == outputVolume })
		}},
		{"no hostPath volume", func(p *corev1.Pod, _ corev1.Container) bool {
			return !slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.HostPath != nil })
		}},
	}
	for _, specName := range []string{"default", "shell_access", "workload", "mcp_servers", "no_network"} {
		in := input(t, specName, orchestrate.WorkloadAgent)
		pods, _, err := Pods(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			c := p.Spec.Containers[0]
			for _, ch := range checks {
				t.Run(specName+"/"+p.Name+"/"+ch.name, func(t *testing.T) {
					if !ch.ok(p, c) {
						t.Errorf("%s: %s does not hold", p.Name, ch.name)
					}
				})
			}
		}
	}
}

func memoryVolumeAt(p *corev1.Pod, c corev1.Container, path string) bool {
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == path })
	if i < 0 {
		return false
	}
	for _, v := range p.Spec.Volumes {
		if v.Name == c.VolumeMounts[i].Name {
			return v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory && v.EmptyDir.SizeLimit != nil && !v.EmptyDir.SizeLimit.IsZero()
		}
	}
	return false
}

func TestMappingRejects(t *testing.T) {
	agent := func(in *Input) *plan.Container {
		return &in.Plan.Containers[len(in.Plan.Containers)-1].Spec
	}
	for _, tt := range []struct {
		name    string
		mutate  func(*Input)
		wantErr string
	}{
		{"no profile", func(in *Input) { in.Profile = nil }, "no profile"},
		{"no runtime image", func(in *Input) { in.RuntimeImage = "" }, "no runtime image"},
		{"bad namespace prefix", func(in *Input) { in.NamespacePrefix = "Runs_" }, `prefix "Runs_"`},
		{"namespace too long", func(in *Input) { in.NamespacePrefix = strings.Repeat("a", 40) }, "must be no more than 63"},
		{"no service ip", func(in *Input) { delete(in.ServiceIPs, spec.SidecarAlias) }, "no ClusterIP for service mcp-sidecar"},
		{"bad service ip", func(in *Input) { in.ServiceIPs[spec.GatewayAlias] = "None" }, `ClusterIP "None"`},
		{"root user", func(in *Input) { agent(in).User = "0:0" }, "is root"},
		{"named user", func(in *Input) { agent(in).User = "nobody" }, "numeric uid:gid"},
		{"host path mount", func(in *Input) {
			agent(in).Mounts = append(agent(in).Mounts, plan.Mount{Source: "/etc", Target: "/host-etc", ReadOnly: true})
		}, "host path /etc at /host-etc has no Kubernetes mapping"},
		{"host gateway without address", func(in *Input) {
			agent(in).ExtraHosts = append(agent(in).ExtraHosts, "host.docker.internal:host-gateway")
		}, "has no Kubernetes counterpart"},
		{"bad host gateway address", func(in *Input) { in.HostGatewayIP = "node-1" }, `host gateway address "node-1"`},
		{"tmpfs without size", func(in *Input) { agent(in).Tmpfs = map[string]string{"/tmp": "rw,noexec"} }, "no size"},
		{"ulimit a role cannot set", func(in *Input) {
			agent(in).Ulimits = append(agent(in).Ulimits, plan.Ulimit{Name: "core", Soft: 0, Hard: 0})
		}, `limit "core"`},
		{"unlimited ulimit", func(in *Input) {
			agent(in).Ulimits = append(agent(in).Ulimits, plan.Ulimit{Name: "nofile", Soft: -1, Hard: -1})
		}, "unlimited"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := input(t, "default", orchestrate.WorkloadAgent)
			tt.mutate(&in)
			_, err := Objects(in)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestRlimitsEnv: each role's container hands it the plan's ulimits but
// nproc, and the role's own reader (harden.RlimitsFromEnv) reads exactly
// those; a pod takes no ulimits, so without them probe T18 finds no file
// size limit.
func TestRlimitsEnv(t *testing.T) {
	for _, w := range []orchestrate.Workload{orchestrate.WorkloadAgent, orchestrate.WorkloadProbe} {
		in := input(t, "default", w)
		pods, _, err := Pods(in)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range pods {
			env := map[string]string{}
			for _, e := range p.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			got, err := harden.RlimitsFromEnv(func(k string) string { return env[k] })
			if err != nil {
				t.Fatalf("%s: %v", p.Name, err)
			}
			var want []harden.Rlimit
			for _, u := range in.Plan.Containers[i].Spec.Ulimits {
				if u.Name != "nproc" {
					want = append(want, harden.Rlimit{Name: u.Name, Soft: uint64(u.Soft), Hard: uint64(u.Hard)})
				}
			}
			if len(want) < 2 || !slices.ContainsFunc(want, func(r harden.Rlimit) bool { return r.Name == "fsize" }) {
				t.Fatalf("%s: the plan's ulimits %v lack fsize", p.Name, in.Plan.Containers[i].Spec.Ulimits)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: mismatch (-plan +role):\n%s", p.Name, diff)
			}
		}
	}
}

// TestRuntimeDefaultSeccomp: the opt-in weaker profile is RuntimeDefault
// on every container, never Unconfined.
func TestRuntimeDefaultSeccomp(t *testing.T) {
	in := input(t, "default", orchestrate.WorkloadAgent)
	in.RuntimeDefaultSeccomp = true
	pods, _, err := Pods(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			if s := c.SecurityContext.SeccompProfile; s == nil || s.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("%s/%s seccomp = %+v, want RuntimeDefault", p.Name, c.Name, s)
			}
		}
	}
}

// TestNetguardInit: only the agent pod has the init container; it alone
// adds NET_ADMIN, and it allows exactly the agent's edges.
func TestNetguardInit(t *testing.T) {
	pods, _, err := Pods(input(t, "default", orchestrate.WorkloadAgent))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Name != PodName(orchestrate.RoleAgent) {
			if len(p.Spec.InitContainers) != 0 {
				t.Errorf("%s has init containers", p.Name)
			}
			continue
		}
		if len(p.Spec.InitContainers) != 1 {
			t.Fatalf("agent pod has %d init containers, want netguard", len(p.Spec.InitContainers))
		}
		ng := p.Spec.InitContainers[0]
		want := []string{"netguard", "--allow", gatewayIP + ":3128", "--allow", gatewayIP + ":3129", "--allow", sidecarIP + ":8000"}
		if !slices.Equal(ng.Args, want) {
			t.Errorf("netguard args = %v, want %v", ng.Args, want)
		}
		if !slices.Equal(ng.SecurityContext.Capabilities.Add, []corev1.Capability{"NET_ADMIN"}) {
			t.Errorf("netguard adds %v, want NET_ADMIN only", ng.SecurityContext.Capabilities.Add)
		}
		if *ng.SecurityContext.AllowPrivilegeEscalation || !*ng.SecurityContext.ReadOnlyRootFilesystem {
			t.Errorf("netguard security context %+v", ng.SecurityContext)
		}
	}
	// Without network the agent's rules allow nothing at all.
	pods, _, err = Pods(input(t, "no_network", orchestrate.WorkloadAgent))
	if err != nil {
		t.Fatal(err)
	}
	if got := pods[0].Spec.InitContainers[0].Args; !slices.Equal(got, []string{"netguard"}) {
		t.Errorf("no-network netguard args = %v, want none allowed", got)
	}
}

// TestGatewayHosts: the entries reach the gateway pod's /etc/hosts and no
// other pod's (the agent and the sidecar resolve nothing but the
// gateway's and sidecar's services).
func TestGatewayHosts(t *testing.T) {
	in := input(t, "default", orchestrate.WorkloadAgent)
	in.GatewayHosts = []HostEntry{{Name: "fake-model.e2e.test", IP: netip.MustParseAddr("10.237.0.40")}, {Name: "learn.microsoft.com", IP: netip.MustParseAddr("10.237.0.40")}}
	pods, _, err := Pods(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		var names []string
		for _, h := range p.Spec.HostAliases {
			if h.IP == "10.237.0.40" {
				names = append(names, h.Hostnames...)
			}
		}
		want := []string(nil)
		if p.Name == PodName(orchestrate.RoleGateway) {
			want = []string{"fake-model.e2e.test", "learn.microsoft.com"}
		}
		if !slices.Equal(names, want) {
			t.Errorf("pod %s: host entries for 10.237.0.40 = %v, want %v", p.Name, names, want)
		}
	}
	in.GatewayHosts = []HostEntry{{Name: "x.test"}}
	if _, _, err := Pods(in); err == nil || !strings.Contains(err.Error(), "gateway host entry") {
		t.Errorf("an entry without an address: got %v, want an error naming the gateway host entry", err)
	}
}

func TestParseHostEntry(t *testing.T) {
	for _, tt := range []struct{ in, want, err string }{
		{"fake-model.e2e.test=10.237.0.5", "fake-model.e2e.test 10.237.0.5", ""},
		{"learn.microsoft.com=::ffff:10.0.0.1", "learn.microsoft.com 10.0.0.1", ""},
		{"api.example=fd00::1", "api.example fd00::1", ""},
		{"no-address", "", "want NAME=ADDRESS"},
		{"Upper.Case=10.0.0.1", "", "not a lower-case host name"},
		{"bad_name=10.0.0.1", "", "not a lower-case host name"},
		{"=10.0.0.1", "", "not a lower-case host name"},
		{"x.test=node-1", "", "not one IP address"},
		{"x.test=0.0.0.0", "", "not one IP address"},
		{"x.test=fe80::1%eth0", "", "not one IP address"},
	} {
		h, err := ParseHostEntry(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseHostEntry(%q) = %v, %v; want error %q", tt.in, h, err, tt.err)
			}
			continue
		}
		if got := h.Name + " " + h.IP.String(); err != nil || got != tt.want {
			t.Errorf("ParseHostEntry(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
