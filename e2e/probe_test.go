//go:build docker

package e2e

// The probe suite against a deliberately unhardened container: no seccomp
// profile, no Landlock policy, Docker's default capabilities, root, the
// host's Docker socket, and a labelled non-internal bridge network (a
// default route out). Every hardening probe must report a violation there,
// so none can pass vacuously. The probes only inspect routes, resolve
// reserved names, talk to the Docker socket's /_ping, and (G41) send to the
// host's own address on the test network, where a canary listens. Docker's embedded
// DNS would forward the reserved names to the host's resolver, off the
// machine, so the container's --dns is a fixture on the test's network
// that answers NXDOMAIN to everything: the DNS probes still see a name
// server answer, and nothing leaves the machine.

import (
	"encoding/json"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/probe"
)

// hardeningProbes must each be a violation in an unhardened container.
var hardeningProbes = []string{
	// mcpsidecar's design claims.
	"G40/T01", "G40/T02", "G40/T03", "G40/T04", "G40/T05", "G40/T08", "G40/T09", "G40/T10", "G40/T11",
	"G40/T13", "G40/T14", "G40/T15", "G40/T16", "G40/T17", "G40/T18",
	// The seed's catalogue: spawning, code from writable paths, direct
	// egress by route, raw sockets, privileged binds, DNS exfiltration,
	// system settings.
	"G06/T01", "G06/T04", "G06/T11", "G06/T12", "G07/T02", "G07/T05", "G07/T06", "G07/T08", "G21/T05",
	"G09/T07", "G09/T08", "G09/T16", "G09/T17", "G09/T18", "G09/T20", "G09/T22", "G09/T23", "G09/T25",
	"G19/T07",
	// The denied directory: without a fixture, the root directory and its
	// /.dockerenv, which a root container without Landlock can use.
	"G02/T10", "G03/T10", "G03/T11", "G03/T12", "G03/T13", "G03/T14", "G03/T15", "G03/T16",
	"G03/T17", "G03/T18", "G16/T02",
	// The ways out of issue 12: the host's address on the test network
	// (a canary listens there), Fast Open, listen without bind, sockets no
	// role needs, setuid bits, another role's output (planted in the
	// output directory).
	"G41/T01", "G41/T02", "G41/T03", "G41/T04", "G41/T05", "G41/T06", "G41/T07", "G41/T08", "G41/T09",
	"G41/T10", "G41/T11",
	// Credentials (issue 15): the container is given a key, in its
	// environment (G05 T05) and in a file of its output directory (G40 T19).
	"G05/T05", "G40/T19",
}

// probeFakeKey is the negative control's key: fake, never a real one.
const probeFakeKey = "sk-test-negative-control-0123456789abcdef"

func TestProbeUnhardenedContainer(t *testing.T) {
	NeedDocker(t)
	id := RandHex(4)
	label := "mcpsidecar.e2e=probe-" + id
	CleanupLabelled(t, label)
	image := "mcpsidecar-probe-e2e:" + id

	buildProbeImage(t, image, label)
	network := "mcpsidecar-probe-e2e-" + id
	probeDocker(t, "network", "create", "--label", TestLabel, "--label", label, network)
	dnsName := "mcpsidecar-probe-e2e-" + id + "-dns"
	dnsIP := startDNSFixture(t, id, label, network, dnsName)
	canary := startHostCanary(t, network)
	out := t.TempDir()
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	plantOtherRoles(t, out)
	if err := os.WriteFile(filepath.Join(out, ".env"), []byte("OPENAI_API_KEY="+probeFakeKey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pctx, _ := json.Marshal(map[string]any{"sidecar_url": "http://mcp-sidecar.invalid:8000/mcp"})
	probeDocker(t, "run", "--name", "mcpsidecar-probe-e2e-"+id, "--label", TestLabel, "--label", label,
		"--network", network, "--dns", dnsIP, "--security-opt", "seccomp=unconfined", "--user", "0:0",
		"--tmpfs", "/tmp:rw,exec", "--tmpfs", "/sandbox-work:rw,exec",
		"-v", out+":/sandbox-output", "-v", "/var/run/docker.sock:/var/run/docker.sock",
		"-e", "SANDBOX_AGENT_CONTAINER=1", "-e", probe.ContextEnv+"="+string(pctx), "-e", "OPENAI_API_KEY="+probeFakeKey,
		image, "probe", "--unhardened", "--serialize-evidence")

	rep, err := probe.LoadReport(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"status.ndjson", "done.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	t.Logf("unhardened container: %s", rep.Summary())
	for _, g := range rep.Groups {
		for _, c := range g.Capabilities {
			if g.ID == "G41" {
				t.Logf("%s/%s %s: %s (%s)", g.ID, c.ID, c.Verdict, c.Tool.Summary, c.Tool.Evidence)
			}
		}
	}
	if n := rep.Probes(); n < 240 {
		t.Errorf("report has %d probes, want the whole catalogue", n)
	}
	for _, key := range hardeningProbes {
		g, p, _ := strings.Cut(key, "/")
		c := rep.Find(g, p)
		if c == nil {
			t.Errorf("%s: missing from the report", key)
			continue
		}
		if c.Verdict != probe.Violation {
			t.Errorf("%s %q: verdict %s (%s), want violation in an unhardened container", key, c.Title, c.Verdict, c.Tool.Summary)
		}
	}
	// The DNS probes' answers came from the fixture, not a real resolver.
	for _, key := range []string{"G40/T05", "G09/T25"} {
		g, p, _ := strings.Cut(key, "/")
		if c := rep.Find(g, p); c == nil || !strings.Contains(c.Tool.Summary, "NXDOMAIN") {
			t.Errorf("%s: %+v, want a name server's NXDOMAIN", key, c)
		}
	}
	queries := probeDocker(t, "logs", dnsName)
	for _, name := range []string{"probe-resolve.invalid.", "probe-dns.invalid.", "c2FuZGJveC10ZXN0ZXI.probe-exfil.invalid."} {
		if !strings.Contains(queries, `"name":"`+name+`"`) {
			t.Errorf("the DNS fixture never saw %s: the query went elsewhere\n%s", name, queries)
		}
	}
	// The host-reach probes reached the canary on the host's address.
	if tcp, udp := canary.tcp.Load(), canary.udp.Load(); tcp == 0 || udp == 0 {
		t.Errorf("the host canary on %s saw %d TCP connections and %d UDP queries, want both", canary.addr, tcp, udp)
	}
	if n := rep.Violations(); n < len(hardeningProbes) {
		t.Errorf("%d violations, want at least the %d hardening probes", n, len(hardeningProbes))
	}
	// The credential probes name where the key was, never the key.
	for key, want := range map[string]string{"G05/T05": "OPENAI_API_KEY (a secret-named variable)", "G40/T19": "/sandbox-output/.env: holds an sk- key"} {
		g, p, _ := strings.Cut(key, "/")
		if c := rep.Find(g, p); c == nil || !strings.Contains(c.Tool.Evidence, want) {
			t.Errorf("%s: %+v, want evidence naming %q", key, c, want)
		}
	}
	if data, err := os.ReadFile(filepath.Join(out, "report.json")); err != nil || strings.Contains(string(data), probeFakeKey) {
		t.Errorf("report.json holds the key (or is unreadable: %v)", err)
	}
	// The gateway probes have no gateway here: unsupported, never a pass.
	for _, key := range []string{"G40/T06", "G40/T07"} {
		g, p, _ := strings.Cut(key, "/")
		if c := rep.Find(g, p); c == nil || c.Verdict == probe.Pass {
			t.Errorf("%s passed without a gateway", key)
		}
	}
	// A scratch image has no shell: the shell path is N/A, itself a finding.
	if c := rep.Find("G01", "T01"); c == nil || c.Shell.Outcome != probe.NA || !strings.Contains(c.Shell.Summary, "No shell") {
		t.Errorf("G01/T01 shell path: %+v, want N/A for a missing shell", c)
	}
}

// hostCanary listens on the host's own address on the test network (the
// network's gateway), never on 0.0.0.0, and counts what reaches it.
type hostCanary struct {
	addr     string
	tcp, udp atomic.Int32
}

// startHostCanary listens on TCP 8000 (the sidecar's port, which the
// agent's Landlock rule allows on any address) and UDP 53 of the host's
// address on network, answering each DNS-shaped query with itself marked
// as a response; closed at cleanup.
func startHostCanary(t *testing.T, network string) *hostCanary {
	t.Helper()
	gw := strings.TrimSpace(probeDocker(t, "network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", network))
	if a, err := netip.ParseAddr(gw); err != nil || !a.IsPrivate() {
		t.Fatalf("the host's address on %s: %q (%v), want a private address", network, gw, err)
	}
	c := &hostCanary{addr: gw}
	l, err := net.Listen("tcp", net.JoinHostPort(gw, "8000"))
	if err != nil {
		t.Fatalf("canary on %s: %v", gw, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.tcp.Add(1)
			conn.Close()
		}
	}()
	pc, err := net.ListenPacket("udp", net.JoinHostPort(gw, "53"))
	if err != nil {
		t.Fatalf("canary on %s: %v", gw, err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			c.udp.Add(1)
			if n > 2 {
				buf[2] |= 0x80 // QR: a response
				_, _ = pc.WriteTo(buf[:n], from)
			}
		}
	}()
	return c
}

// plantOtherRoles puts what the gateway and the sidecar write into the
// control's output directory, as a harness that mounted the whole run
// directory would expose it.
func plantOtherRoles(t *testing.T, out string) {
	t.Helper()
	for _, f := range []string{"gateway/egress-decisions.jsonl", "gateway/harden-report.json", "sidecar/harden-report.json"} {
		p := filepath.Join(out, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// buildProbeImage builds FROM scratch + the static binary under test,
// removed at cleanup.
func buildProbeImage(t *testing.T, image, label string) {
	t.Helper()
	scratchImage(t, image, "FROM scratch\nCOPY mcpsidecar /mcpsidecar\nENTRYPOINT [\"/mcpsidecar\"]\n",
		map[string]string{"mcpsidecar": Binary(t)}, nil, TestLabel, label)
}

// startDNSFixture runs the fixture's NXDOMAIN name server, hardened, on
// network and returns its address there for --dns.
func startDNSFixture(t *testing.T, id, label, network, name string) string {
	t.Helper()
	fixture := goBuild(t, "./e2e/fixtures/cmd/fixture", filepath.Join(t.TempDir(), "fixture"))
	image := scratchImage(t, "mcpsidecar-probe-e2e-dns:"+id, "FROM scratch\nCOPY fixture /fixture\nENTRYPOINT [\"/fixture\"]\n",
		map[string]string{"fixture": fixture}, nil, TestLabel, label)
	probeDocker(t, "run", "-d", "--name", name, "--label", TestLabel, "--label", label,
		"--network", network, "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--user", "65532:65532", "--sysctl", "net.ipv4.ip_unprivileged_port_start=0",
		"--memory", "64m", "--pids-limit", "64", image, "dns", "--listen", ":53")
	ip := strings.TrimSpace(probeDocker(t, "inspect", "-f", "{{(index .NetworkSettings.Networks \""+network+"\").IPAddress}}", name))
	if _, err := netip.ParseAddr(ip); err != nil {
		t.Fatalf("the DNS fixture's address on %s: %q: %v", network, ip, err)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(probeDocker(t, "logs", name), `"listening"`); {
		if time.Now().After(deadline) {
			t.Fatal("the DNS fixture did not start listening within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return ip
}

func probeDocker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args[:2], " "), err, out)
	}
	return string(out)
}

// oldEngineRouteProbes judge direct egress by the routing table. Engines
// before 25 give containers on --internal networks a default route
// (Docker's iptables drop the traffic; moby#46603 removed the route), so on
// such an engine, which the harness accepts only with --allow-old-engine,
// these are the violations test-sandbox must find, and the only ones.
var oldEngineRouteProbes = map[string]bool{
	"G09/T07": true, "G09/T08": true, "G09/T17": true, "G09/T20": true, "G40/T04": true,
}

// TestProbeTestSandbox runs test-sandbox on the default spec and on the
// default spec plus shell_access: the first has no violation (beyond the
// old engine's default route), and report diff shows that shell_access
// changes exactly the spawn-related probes.
func TestProbeTestSandbox(t *testing.T) {
	NeedDocker(t)
	id := "probe-ts-" + RandHex(4)
	label := "mcpsidecar.e2e=" + id
	CleanupLabelled(t, label)
	runsDir := t.TempDir()
	shellSpec := filepath.Join(t.TempDir(), "shell.toml")
	spec := "schema_version = 1\ncapabilities = [\"network\", \"mcp_client\", \"openai_agents\", \"shell_access\"]\n" +
		"allowed_domains = [\".example.com\", \".gov.uk\", \".microsoft.com\"]\nallowed_ip_addresses = []\n"
	if err := os.WriteFile(shellSpec, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	// The host holds a (fake) key: it goes to the gateway, and the probes
	// must find only the placeholder in the sandbox.
	// With evidence kept, to see what G05 T05 found (redacted as always).
	base := runTestSandboxEnv(t, id, runsDir, []string{"OPENAI_API_KEY=" + probeFakeKey}, "--serialize-evidence")
	shell := runTestSandbox(t, id, runsDir, "--spec", shellSpec)
	RequireNothingLeft(t, label)

	old := engineMajor(t) < 25
	for _, g := range base.Groups {
		for _, c := range g.Capabilities {
			key := g.ID + "/" + c.ID
			if c.Verdict == probe.Violation && !(old && oldEngineRouteProbes[key]) {
				t.Errorf("default spec: %s %q is a violation: %s", key, c.Title, c.VerdictReason)
			}
		}
	}
	for _, key := range []string{"G05/T05", "G40/T19"} {
		g, p, _ := strings.Cut(key, "/")
		if c := base.Find(g, p); c == nil || c.Verdict != probe.Pass || c.Tool.Outcome != probe.Denied {
			t.Errorf("default spec: %s: %+v, want pass (Denied: only the placeholder)", key, c)
		}
	}
	if c := base.Find("G40", "T19"); c != nil {
		t.Logf("G40/T19 in the sandbox: %s (%s)", c.Tool.Summary, c.Tool.Evidence)
	}
	if c := base.Find("G05", "T05"); c == nil || !strings.Contains(c.Tool.Evidence, "OPENAI_API_KEY holds the run's placeholder") {
		t.Errorf("G05/T05 evidence %+v, want the placeholder named", c)
	}
	tsCheckCredentialVerdict(t, runsDir)
	spawn := map[string]bool{}
	for _, p := range probe.Catalogue() {
		if p.Spawn {
			spawn[p.Group+"/"+p.ID] = true
		}
	}
	changed := map[string]bool{}
	for _, ch := range probe.Diff(base, shell) {
		changed[ch.Group+"/"+ch.ID] = true
		if !spawn[ch.Group+"/"+ch.ID] {
			t.Errorf("shell_access changed %s/%s %q, which is not spawn-related", ch.Group, ch.ID, ch.Title)
		}
		if ch.Worse {
			t.Errorf("shell_access made %s/%s worse", ch.Group, ch.ID)
		}
	}
	// Every spawn probe that the no-spawn filter refused by default must
	// change; those with nothing to spawn (no shell, no interpreter in the
	// image) stay N/A.
	for key := range spawn {
		g, p, _ := strings.Cut(key, "/")
		if c := base.Find(g, p); c != nil && c.Tool.Outcome == probe.Denied && !changed[key] {
			t.Errorf("shell_access did not change spawn-related probe %s", key)
		}
	}
	if len(changed) < 8 {
		t.Errorf("shell_access changed %d probes, want the 8 that execute the binary", len(changed))
	}
}

// runTestSandbox runs test-sandbox and returns its report; exit 0 without
// violations, 4 with.
func runTestSandbox(t *testing.T, id, runsDir string, args ...string) *probe.Report {
	t.Helper()
	return runTestSandboxEnv(t, id, runsDir, nil, args...)
}

// runTestSandboxEnv is runTestSandbox with extra host variables.
func runTestSandboxEnv(t *testing.T, id, runsDir string, env []string, args ...string) *probe.Report {
	t.Helper()
	before, _ := os.ReadDir(runsDir)
	c, code := RunCLI(t, id, env, append([]string{"test-sandbox", "--allow-old-engine", "--quiet", "--runs-dir", runsDir}, args...)...)
	after, _ := os.ReadDir(runsDir)
	if len(after) != len(before)+1 {
		t.Fatalf("test-sandbox exited %d without a new run directory\nstderr:\n%s", code, c.Stderr.String())
	}
	rep, err := probe.LoadReport(filepath.Join(runsDir, after[len(after)-1].Name(), "report.json"))
	if err != nil {
		t.Fatalf("test-sandbox exited %d: %v\nstderr:\n%s", code, err, c.Stderr.String())
	}
	if want := map[bool]int{true: 4, false: 0}[rep.Violations() > 0]; code != want {
		t.Errorf("test-sandbox exited %d with %d violations, want %d", code, rep.Violations(), want)
	}
	return rep
}

func engineMajor(t *testing.T) int {
	t.Helper()
	v := strings.TrimSpace(probeDocker(t, "version", "--format", "{{.Server.Version}}"))
	major := 0
	for _, r := range v {
		if r < '0' || r > '9' {
			break
		}
		major = major*10 + int(r-'0')
	}
	return major
}

// tsCheckCredentialVerdict: the first run of runsDir records where the
// model credential lived (the gateway) and the host's own check that its
// value is in no file of the run; no file holds the fake key.
func tsCheckCredentialVerdict(t *testing.T, runsDir string) {
	t.Helper()
	entries, err := os.ReadDir(runsDir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("runs dir: %v", err)
	}
	runDir := filepath.Join(runsDir, entries[0].Name())
	var md struct {
		Credentials []struct{ Variable, Host, Lives string } `json:"credentials"`
		Verdict     struct {
			Checks []struct {
				Name, Detail string
				OK           bool
			} `json:"checks"`
		} `json:"verdict"`
	}
	data, err := os.ReadFile(filepath.Join(runDir, "run-metadata.json"))
	if err != nil || json.Unmarshal(data, &md) != nil {
		t.Fatalf("run-metadata.json: %v", err)
	}
	if len(md.Credentials) != 1 || md.Credentials[0].Variable != "OPENAI_API_KEY" || md.Credentials[0].Lives != "gateway" {
		t.Errorf("run-metadata.json credentials %+v, want OPENAI_API_KEY in the gateway", md.Credentials)
	}
	found := false
	for _, c := range md.Verdict.Checks {
		if c.Name == "credentials held by the gateway stayed there" {
			found = true
			if !c.OK {
				t.Errorf("host check failed: %s", c.Detail)
			}
		}
	}
	if !found {
		t.Error("the verdict has no check that the held credential stayed in the gateway")
	}
	_ = filepath.WalkDir(runDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, rerr := os.ReadFile(p); rerr == nil && strings.Contains(string(b), probeFakeKey) {
				t.Errorf("%s holds the key", p)
			}
		}
		return nil
	})
}
