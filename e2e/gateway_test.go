//go:build docker

package e2e

// The egress gateway, both engines, held to one standard: our gateway
// (`mcpsidecar gateway`) and Squid (the image scripts/build-squid-image.sh
// builds from Debian's package, with the squid.conf internal/spec writes)
// each run in a container on two internal Docker networks of the test's own,
// between a client container and fixture servers. Both networks are
// --internal and every container's DNS forwards only to 127.0.0.1, so even a
// gateway that wrongly allowed a request could not send a packet or a query
// off the machine.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

const gwTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// gwCase is one request from the client container and the status each
// engine answers: 200 means the upstream fixture answered. Where Squid's
// column differs from ours, docs/egress.md says why.
type gwCase struct {
	Name        string `json:"name"`
	Method      string `json:"method"`
	Target      string `json:"target"`
	Host        string `json:"host,omitempty"`
	Traceparent string `json:"traceparent,omitempty"`
	ours, squid int
}

// gwCases are the requests for a policy allowing .allowed.test and, of
// the fixtures' addresses, only upstream's (up): decoy (on the same
// network, also answering as mixed.allowed.test) and sneaky (on the
// client's network) are private addresses the policy does not cover.
func gwCases(up, decoy string) []gwCase {
	return []gwCase{
		{Name: "allowed-get", Method: "GET", Target: "http://upstream.allowed.test/", Traceparent: gwTraceparent, ours: 200, squid: 200},
		{Name: "allowed-connect", Method: "CONNECT", Target: "upstream.allowed.test:443", Traceparent: gwTraceparent, ours: 200, squid: 200},
		{Name: "allowed-literal", Method: "GET", Target: "http://" + up + "/", Traceparent: gwTraceparent, ours: 200, squid: 200},
		// Squid refuses a name outside the allowlist before any lookup
		// ("deny !allowed_sites" with dstdomain -n precedes the dst rules).
		{Name: "denied-name-get", Method: "GET", Target: "http://denied.test/", ours: 403, squid: 403},
		{Name: "denied-name-connect", Method: "CONNECT", Target: "denied.test:443", ours: 403, squid: 403},
		{Name: "private-answer-get", Method: "GET", Target: "http://sneaky.allowed.test/", ours: 403, squid: 403},
		{Name: "private-answer-connect", Method: "CONNECT", Target: "sneaky.allowed.test:443", ours: 403, squid: 403},
		// mixed.allowed.test has two answers, upstream's (covered) and
		// decoy's (not): one uncovered answer refuses the name.
		{Name: "one-private-answer-get", Method: "GET", Target: "http://mixed.allowed.test/", ours: 403, squid: 403},
		{Name: "one-private-answer-connect", Method: "CONNECT", Target: "mixed.allowed.test:443", ours: 403, squid: 403},
		{Name: "uncovered-literal", Method: "GET", Target: "http://" + decoy + "/", ours: 403, squid: 403},
		{Name: "metadata-literal", Method: "GET", Target: "http://169.254.169.254/latest/meta-data/", ours: 403, squid: 403},
		{Name: "private-literal-connect", Method: "CONNECT", Target: "10.0.0.1:443", ours: 403, squid: 403},
		// IPv6 spellings that embed IPv4 (mapped, NAT64, IPv4-compatible,
		// 6to4) and IPv6 loopback.
		{Name: "mapped-metadata", Method: "GET", Target: "http://[::ffff:169.254.169.254]/", ours: 403, squid: 403},
		{Name: "nat64-metadata", Method: "GET", Target: "http://[64:ff9b::a9fe:a9fe]/", ours: 403, squid: 403},
		{Name: "compat-loopback-connect", Method: "CONNECT", Target: "[::127.0.0.1]:443", ours: 403, squid: 403},
		{Name: "6to4-metadata", Method: "GET", Target: "http://[2002:a9fe:a9fe::]/", ours: 403, squid: 403},
		{Name: "ipv6-loopback-connect", Method: "CONNECT", Target: "[::1]:443", ours: 403, squid: 403},
		// A decimal-integer host (inet_aton spelling): Squid reads it as
		// the IPv4 address, NormalizeHost refuses the spelling.
		{Name: "decimal-loopback", Method: "GET", Target: "http://2130706437/", ours: 403, squid: 403},
		{Name: "decimal-allowed-literal", Method: "GET", Target: "http://" + gwDecimal(up) + "/", ours: 403, squid: 200},
		{Name: "connect-22", Method: "CONNECT", Target: "upstream.allowed.test:22", ours: 403, squid: 403},
		{Name: "connect-80", Method: "CONNECT", Target: "upstream.allowed.test:80", ours: 403, squid: 403},
		{Name: "http-8080", Method: "GET", Target: "http://upstream.allowed.test:8080/", ours: 403, squid: 403},
		// Squid routes by the URI and ignores a disagreeing Host header.
		{Name: "host-mismatch", Method: "GET", Target: "http://upstream.allowed.test/", Host: "sneaky.allowed.test", ours: 403, squid: 200},
		// Squid strips user information and forwards.
		{Name: "userinfo", Method: "GET", Target: "http://user@upstream.allowed.test/", Host: "upstream.allowed.test", ours: 403, squid: 200},
	}
}

// gwDecimal spells an IPv4 address as one decimal integer.
func gwDecimal(ip string) string {
	a := netip.MustParseAddr(ip).As4()
	return strconv.FormatUint(uint64(binary.BigEndian.Uint32(a[:])), 10)
}

// gwHardenPolicy is the gateway's in-container policy as the harness
// plans it (internal/orchestrate's golden plan), so the gateway is tested
// under Landlock and its seccomp filter.
const gwHardenPolicy = `{"schema":"mcpsidecar.harden/v1","role":"gateway","landlock":{"min_abi":4,` +
	`"read_only_dirs":["/etc","/proc"],"read_only_files":["/dev/random","/dev/urandom"],` +
	`"read_write_dirs":["/tmp","/sandbox-work","/sandbox-output"],"read_write_files":["/dev/null"],` +
	`"exec_files":["/mcpsidecar"],"connect_tcp":[53,80,443],"bind_tcp":[3128]},"no_spawn":true,` +
	`"deny_unix_sockets":true,"best_effort":["landlock-net"],"gomaxprocs":1,"gomemlimit_bytes":201326592}`

type gwResult struct {
	Name   string `json:"name"`
	Status int    `json:"status"`
	Body   string `json:"body"`
	Error  string `json:"error"`
}

func TestGatewayEngines(t *testing.T) {
	NeedDocker(t)
	id := RandHex(5)
	dir := t.TempDir()
	image := gwImage(t, id, dir)
	squidImage := gwSquidImage(t, id)
	internal, egressNet := gwNetworks(t, id)
	upName, decoyName := "mcpsidecar-e2e-"+id+"-upstream", "mcpsidecar-e2e-"+id+"-decoy"
	gwRun(t, upName, egressNet, []string{"upstream.allowed.test", "mixed.allowed.test"}, image, "/gwfixture", "serve", "upstream")
	gwRun(t, decoyName, egressNet, []string{"mixed.allowed.test"}, image, "/gwfixture", "serve", "decoy")
	gwRun(t, "mcpsidecar-e2e-"+id+"-sneaky", internal, []string{"sneaky.allowed.test"}, image, "/gwfixture", "serve", "sneaky")
	up := gwAddr(t, upName, egressNet)
	cases := gwCases(up, gwAddr(t, decoyName, egressNet))
	cfg := netpolicy.NewConfig([]string{".allowed.test"}, []string{up + "/32"})
	for _, engine := range []string{"ours", "squid"} {
		t.Run(engine, func(t *testing.T) {
			out := filepath.Join(dir, engine)
			if err := os.MkdirAll(out, 0o777); err != nil {
				t.Fatal(err)
			}
			os.Chmod(out, 0o777)
			name := "mcpsidecar-e2e-" + id + "-gw-" + engine
			if engine == "ours" {
				gwStartOurs(t, name, image, internal, egressNet, out, cfg)
			} else {
				gwStartSquid(t, name, squidImage, internal, egressNet, out, dir, cfg)
			}
			results := gwProbe(t, id, image, internal, engine, cases)
			docker(t, "stop", "-t", "10", name)
			gwCheckResults(t, engine, cases, results)
			if engine == "ours" {
				gwCheckOurLog(t, filepath.Join(out, "egress-decisions.jsonl"), cases, up)
			} else {
				gwCheckSquidLog(t, filepath.Join(out, egress.SquidAccessLogFile), cases, up)
			}
		})
	}
}

// gwWant is the status c expects from engine.
func gwWant(c gwCase, engine string) int {
	if engine == "squid" {
		return c.squid
	}
	return c.ours
}

func gwCheckResults(t *testing.T, engine string, cases []gwCase, results map[string]gwResult) {
	t.Helper()
	for _, c := range cases {
		want := gwWant(c, engine)
		r, ok := results[c.Name]
		switch {
		case !ok:
			t.Errorf("%s: no result", c.Name)
		case r.Status != want:
			t.Errorf("%s: got %d %q %s, want %d", c.Name, r.Status, r.Body, r.Error, want)
		case want == 200 && !strings.Contains(r.Body, "fixture upstream"):
			t.Errorf("%s: body %q, want the upstream fixture's", c.Name, r.Body)
		case want != 200 && strings.Contains(r.Body, "fixture "):
			t.Errorf("%s: a fixture answered a denied request: %q", c.Name, r.Body)
		case want == 403 && engine == "ours" && !strings.Contains(r.Body, "denied: "):
			t.Errorf("%s: body %q does not name a reason", c.Name, r.Body)
		}
	}
}

// gwCount is how many of cases engine should allow.
func gwCount(cases []gwCase, engine string) (allowed int) {
	for _, c := range cases {
		if gwWant(c, engine) == 200 {
			allowed++
		}
	}
	return allowed
}

// gwCheckOurLog: one line per request, the allowed ones with the rule and
// the correlation id, every denied one with a reason.
func gwCheckOurLog(t *testing.T, path string, cases []gwCase, up string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var allowed, denied int
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var d egress.Decision
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("decision line %q: %v", line, err)
		}
		switch {
		case d.Decision == egress.Allow:
			allowed++
			byName := d.Host == "upstream.allowed.test" && d.Rule == ".allowed.test "+up+"/32"
			byLiteral := d.Host == up && d.Rule == up+"/32"
			if !(byName || byLiteral) || d.ResolvedIP != up || d.CorrelationID != "4bf92f3577b34da6a3ce929d0e0e4736" || d.RunID != "e2e" {
				t.Errorf("allowed decision %+v", d)
			}
		case d.Reason == "":
			t.Errorf("denial without a reason: %+v", d)
		default:
			denied++
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "harden-report.json")); err != nil {
		t.Errorf("the gateway wrote no harden report: %v", err)
	}
	if want := gwCount(cases, "ours"); allowed != want || denied != len(cases)-want {
		t.Errorf("%d allowed and %d denied lines, want %d and %d:\n%s", allowed, denied, want, len(cases)-want, b)
	}
}

// gwCheckSquidLog reads Squid's access log through the same parser the
// harness uses and expects a line for each request, the allowed ones to
// upstream.
func gwCheckSquidLog(t *testing.T, path string, cases []gwCase, up string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ds, err := egress.ParseSquidAccessLog(f)
	if err != nil {
		t.Fatal(err)
	}
	var allowed, traced int
	for _, d := range ds {
		if d.Decision == egress.Allow {
			allowed++
			if d.ResolvedIP != up {
				t.Errorf("allowed squid decision %+v", d)
			}
			if d.CorrelationID == "4bf92f3577b34da6a3ce929d0e0e4736" {
				traced++
			}
		}
	}
	// Traced: the cases sending a traceparent, all allowed.
	var wantTraced int
	for _, c := range cases {
		if c.Traceparent != "" {
			wantTraced++
		}
	}
	if want := gwCount(cases, "squid"); allowed != want || traced != wantTraced || len(ds) != len(cases) {
		t.Errorf("%d squid lines, %d allowed, %d traced; want %d, %d allowed, %d traced: %+v",
			len(ds), allowed, traced, len(cases), want, wantTraced, ds)
	}
}

// common container flags: hardened, labelled, DNS forwarding nowhere.
func gwCommon(name string) []string {
	return []string{"--name", name, "--label", "mcpsidecar.test=1", "--read-only", "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges", "--dns", "127.0.0.1", "--memory", "256m", "--pids-limit", "128"}
}

func gwRun(t *testing.T, name, network string, aliases []string, image string, cmd ...string) {
	t.Helper()
	t.Cleanup(func() { dockerErr("rm", "-f", name) })
	args := append([]string{"run", "-d"}, gwCommon(name)...)
	args = append(args, "--user", "65532:65532", "--sysctl", "net.ipv4.ip_unprivileged_port_start=0", "--network", network)
	for _, a := range aliases {
		args = append(args, "--network-alias", a)
	}
	args = append(args, "--entrypoint", cmd[0], image)
	docker(t, append(args, cmd[1:]...)...)
}

// gwStartGateway creates the gateway on the egress network, joins it to
// the internal one as egress-gateway, starts it and waits for its log line.
func gwStartGateway(t *testing.T, name, egressNet, internal, ready string, create []string) {
	t.Helper()
	t.Cleanup(func() { dockerErr("rm", "-f", name) })
	docker(t, append([]string{"create", "--network", egressNet}, create...)...)
	docker(t, "network", "connect", "--alias", "egress-gateway", internal, name)
	docker(t, "start", name)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
		if bytes.Contains(logs, []byte(ready)) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
	t.Fatalf("gateway %s never logged %q:\n%s", name, ready, logs)
}

func gwStartOurs(t *testing.T, name, image, internal, egressNet, out string, cfg netpolicy.Config) {
	t.Helper()
	pol, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	create := append(gwCommon(name), "--user", "65532:65532", "--tmpfs", "/tmp:mode=1777",
		"-e", "MCPSIDECAR_GATEWAY_POLICY="+string(pol), "-e", "MCPSIDECAR_RUN_ID=e2e",
		"-e", "MCPSIDECAR_HARDEN_POLICY="+gwHardenPolicy, "--tmpfs", "/sandbox-work:mode=1777",
		"-v", out+":/sandbox-output", "--entrypoint", "/mcpsidecar", image,
		"gateway", "--listen", ":3128", "--decision-log", "/sandbox-output/egress-decisions.jsonl")
	gwStartGateway(t, name, egressNet, internal, "gateway listening", create)
}

func gwStartSquid(t *testing.T, name, image, internal, egressNet, out, dir string, cfg netpolicy.Config) {
	t.Helper()
	conf := filepath.Join(dir, "squid.conf")
	if err := os.WriteFile(conf, []byte(spec.SquidConf(cfg)), 0o644); err != nil {
		t.Fatal(err)
	}
	create := gwCommon(name)
	for path, opts := range egress.SquidTmpfs {
		create = append(create, "--tmpfs", path+":"+opts)
	}
	create = append(create, "--user", egress.SquidUser, "-v", out+":/sandbox-output",
		"-v", conf+":"+egress.SquidConfPath+":ro", image)
	gwStartGateway(t, name, egressNet, internal, egress.SquidReadyLine, create)
}

// gwProbe runs the client container and returns its results by case name.
func gwProbe(t *testing.T, id, image, internal, engine string, cases []gwCase) map[string]gwResult {
	t.Helper()
	js, _ := json.Marshal(cases)
	name := "mcpsidecar-e2e-" + id + "-client-" + engine
	t.Cleanup(func() { dockerErr("rm", "-f", name) })
	args := append([]string{"run"}, gwCommon(name)...)
	args = append(args, "--user", "65532:65532", "--network", internal, "--entrypoint", "/gwfixture", image,
		"probe", "egress-gateway:3128", string(js))
	out := docker(t, args...)
	results := map[string]gwResult{}
	for _, line := range strings.Split(out, "\n") {
		var r gwResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("client output %q: %v", line, err)
		}
		results[r.Name] = r
	}
	return results
}

func gwNetworks(t *testing.T, id string) (internal, egressNet string) {
	t.Helper()
	internal, egressNet = "mcpsidecar-e2e-"+id+"-gw-internal", "mcpsidecar-e2e-"+id+"-gw-egress"
	for _, n := range []string{internal, egressNet} {
		n := n
		t.Cleanup(func() { dockerErr("network", "rm", n) })
		docker(t, "network", "create", "--internal", "--label", "mcpsidecar.test=1", n)
	}
	return internal, egressNet
}

// gwAddr is container's IPv4 address on network.
func gwAddr(t *testing.T, container, network string) string {
	t.Helper()
	ip := docker(t, "inspect", "-f", "{{(index .NetworkSettings.Networks \""+network+"\").IPAddress}}", container)
	if _, err := netip.ParseAddr(ip); err != nil {
		t.Fatalf("address of %s on %s: %v", container, network, err)
	}
	return ip
}

// gwImage is a FROM-scratch image with the mcpsidecar binary and the
// fixture, built locally (no registry).
func gwImage(t *testing.T, id, dir string) string {
	t.Helper()
	fixture := goBuild(t, "./e2e/testdata/gateway/gwfixture", filepath.Join(dir, "gwfixture"))
	return scratchImage(t, "mcpsidecar-e2e-gw:"+id, "FROM scratch\nCOPY mcpsidecar gwfixture /\n",
		map[string]string{"mcpsidecar": Binary(t), "gwfixture": fixture}, nil, "mcpsidecar.test=1")
}

// gwSquidImage builds the Squid image with the repository's script.
func gwSquidImage(t *testing.T, id string) string {
	t.Helper()
	image := "mcpsidecar-squid:e2e-" + id
	t.Cleanup(func() { dockerErr("rmi", "-f", image) })
	cmd := exec.Command("bash", filepath.Join(repoRoot(t), "scripts", "build-squid-image.sh"), image)
	cmd.Env = append(os.Environ(), "MCPSIDECAR_IMAGE_LABELS=mcpsidecar.test=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the squid image: %v\n%s", err, b)
	}
	return image
}
