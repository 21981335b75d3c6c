//go:build docker

package e2e

// Allowlist entries with a port (issue 13 item 6), through both gateway
// engines: a fixture server on non-standard ports reached by a
// "name:PORT" and an "IP:PORT" entry, and a fake on this host, bound only
// to the Docker bridge's host address, reached as
// host.docker.internal:PORT by a gateway started with Docker's
// host-gateway mapping (as the harness starts it when an entry names the
// host). An entry with a port opens exactly that port; one without keeps
// 80/443.
//
// The gateway's egress network here is not --internal: a gateway on an
// internal network has no route to the bridge's host address. Every
// request still goes only to this test's containers or to this host's own
// bridge address: no case names any other address, and every container's
// DNS forwards only to 127.0.0.1, so a name outside the fixtures' aliases
// resolves to nothing.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/agent/fakemodel"
	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// ptCase is a gwCase with what the decision line of our gateway must say:
// the rule that allowed it, or a piece of the reason it was refused.
type ptCase struct {
	gwCase
	body   string // the fixture that must answer an allowed request
	rule   string // our decision's rule for an allowed request
	reason string // a piece of our decision's reason for a refused one
}

func TestGatewayPorts(t *testing.T) {
	NeedDocker(t)
	id := RandHex(5)
	dir := t.TempDir()
	image := gwImage(t, id, dir)
	squidImage := gwSquidImage(t, id)
	internal, egressNet := ptNetworks(t, id)
	upName := "mcpsidecar-e2e-" + id + "-ported"
	gwRun(t, upName, egressNet, []string{"ported.ports.test", "plain.ports.test"}, image, "/gwfixture", "serve", "ported", "80", "443", "8081", "8082")
	up := gwAddr(t, upName, egressNet)
	bridge := ptBridgeAddr(t)
	hostPort := ptHostFake(t, bridge)
	cfg := netpolicy.NewConfig(
		[]string{"ported.ports.test:8081", "plain.ports.test", fmt.Sprintf("%s:%d", netpolicy.HostGateway, hostPort)},
		[]string{up + ":8081"})
	cases := ptCases(up, bridge.String(), hostPort)
	for _, engine := range []string{"ours", "squid"} {
		t.Run(engine, func(t *testing.T) {
			out := filepath.Join(dir, engine)
			if err := os.MkdirAll(out, 0o777); err != nil {
				t.Fatal(err)
			}
			os.Chmod(out, 0o777)
			name := "mcpsidecar-e2e-" + id + "-gw-" + engine
			if engine == "ours" {
				ptStartOurs(t, name, image, internal, egressNet, out, cfg)
			} else {
				ptStartSquid(t, name, squidImage, internal, egressNet, out, dir, cfg)
			}
			gcs := make([]gwCase, len(cases))
			for i, c := range cases {
				gcs[i] = c.gwCase
			}
			results := gwProbe(t, id, image, internal, engine, gcs)
			docker(t, "stop", "-t", "10", name)
			ptCheckResults(t, engine, cases, results)
			if engine == "ours" {
				ptCheckOurLog(t, filepath.Join(out, "egress-decisions.jsonl"), cases)
			} else {
				ptCheckSquidLog(t, filepath.Join(out, egress.SquidAccessLogFile), cases, up, bridge.String())
			}
		})
	}
}

// ptCases are the requests for the policy
//
//	allowed_domains      = ["ported.ports.test:8081", "plain.ports.test", "host.docker.internal:HP"]
//	allowed_ip_addresses = ["UP:8081"]
//
// where the fixture at UP answers as ported.ports.test and
// plain.ports.test on 80, 443, 8081 and 8082, and the host fake listens on
// the bridge address BR, port HP.
func ptCases(up, br string, hp int) []ptCase {
	hdi := netpolicy.HostGateway
	hpS, otherS := strconv.Itoa(hp), strconv.Itoa(hp+1)
	allow := func(name, method, target, body, rule string) ptCase {
		return ptCase{gwCase: gwCase{Name: name, Method: method, Target: target, Traceparent: gwTraceparent, ours: 200, squid: 200}, body: body, rule: rule}
	}
	deny := func(name, method, target, reason string) ptCase {
		return ptCase{gwCase: gwCase{Name: name, Method: method, Target: target, ours: 403, squid: 403}, reason: reason}
	}
	return []ptCase{
		// An entry with a port: that port, plain HTTP and CONNECT.
		allow("name-port-get", "GET", "http://ported.ports.test:8081/", "fixture ported", "ported.ports.test:8081 "+up+":8081"),
		allow("name-port-connect", "CONNECT", "ported.ports.test:8081", "fixture ported", "ported.ports.test:8081 "+up+":8081"),
		// ... and no other, not even the default ones.
		deny("name-other-port-get", "GET", "http://ported.ports.test:8082/",
			`HTTP to port 8082 is not allowed for ported.ports.test: its rule "ported.ports.test:8081" opens 8081; to open this port add "ported.ports.test:8082"`),
		deny("name-other-port-connect", "CONNECT", "ported.ports.test:8082", `CONNECT to port 8082 is not allowed for ported.ports.test`),
		deny("name-port-entry-80", "GET", "http://ported.ports.test/", `HTTP to port 80 is not allowed for ported.ports.test: its rule "ported.ports.test:8081" opens 8081`),
		deny("name-port-entry-443", "CONNECT", "ported.ports.test:443", `CONNECT to port 443 is not allowed for ported.ports.test`),
		// An entry without a port keeps 80 and 443: 8081 stays refused.
		allow("no-port-entry-80", "GET", "http://plain.ports.test/", "fixture ported", "plain.ports.test "+up+":8081"),
		deny("no-port-entry-8081-get", "GET", "http://plain.ports.test:8081/",
			`HTTP to port 8081 is not allowed for plain.ports.test: its rule "plain.ports.test" opens HTTP 80, 443; CONNECT 443; to open this port add "plain.ports.test:8081"`),
		deny("no-port-entry-8081-connect", "CONNECT", "plain.ports.test:8081", `CONNECT to port 8081 is not allowed for plain.ports.test`),
		// An address entry with a port, the same.
		allow("ip-port-get", "GET", "http://"+up+":8081/", "fixture ported", up+":8081"),
		allow("ip-port-connect", "CONNECT", up+":8081", "fixture ported", up+":8081"),
		deny("ip-other-port-get", "GET", "http://"+up+":8082/", `HTTP to port 8082 is not allowed for IP literal `+up+`: its rule "`+up+`:8081" opens 8081`),
		deny("ip-port-entry-80", "GET", "http://"+up+"/", `HTTP to port 80 is not allowed for IP literal `+up),
		// The Docker host, through the gateway's host-gateway mapping,
		// on the entry's port alone.
		allow("host-gateway-get", "GET", "http://"+hdi+":"+hpS+"/", "fixture host", hdi+":"+hpS+" "+netpolicy.HostGatewayRule),
		allow("host-gateway-connect", "CONNECT", hdi+":"+hpS, "fixture host", hdi+":"+hpS+" "+netpolicy.HostGatewayRule),
		deny("host-gateway-other-port", "GET", "http://"+hdi+":"+otherS+"/", `HTTP to port `+otherS+` is not allowed for `+hdi),
		deny("host-gateway-other-port-connect", "CONNECT", hdi+":"+otherS, `CONNECT to port `+otherS+` is not allowed for `+hdi),
		deny("host-gateway-80", "GET", "http://"+hdi+"/", `HTTP to port 80 is not allowed for `+hdi),
		// The host's address written as a literal is not the entry.
		deny("host-literal", "GET", "http://"+br+":"+hpS+"/", `IP literal `+br+` is not in allowed_ip_addresses`),
		deny("host-literal-connect", "CONNECT", br+":"+hpS, `IP literal `+br+` is not in allowed_ip_addresses`),
	}
}

func ptCheckResults(t *testing.T, engine string, cases []ptCase, results map[string]gwResult) {
	t.Helper()
	for _, c := range cases {
		want := gwWant(c.gwCase, engine)
		r, ok := results[c.Name]
		switch {
		case !ok:
			t.Errorf("%s: no result", c.Name)
		case r.Status != want:
			t.Errorf("%s %s %s: got %d %q %s, want %d", c.Name, c.Method, c.Target, r.Status, r.Body, r.Error, want)
		case want == 200 && !strings.Contains(r.Body, c.body):
			t.Errorf("%s: body %q, want %q's", c.Name, r.Body, c.body)
		case want != 200 && strings.Contains(r.Body, "fixture "):
			t.Errorf("%s: a fixture answered a denied request: %q", c.Name, r.Body)
		case want == 403 && engine == "ours" && !strings.Contains(r.Body, c.reason):
			t.Errorf("%s: body %q does not give the reason %q", c.Name, r.Body, c.reason)
		}
	}
}

// ptKey identifies a request in a decision log.
func ptKey(method, host string, port int) string {
	return fmt.Sprintf("%s %s %d", method, host, port)
}

// ptCaseKey is ptKey for a case's request.
func ptCaseKey(t *testing.T, c ptCase) string {
	t.Helper()
	hostport := c.Target
	if c.Method != "CONNECT" {
		hostport = strings.TrimSuffix(strings.TrimPrefix(c.Target, "http://"), "/")
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, "80"
	}
	p, _ := strconv.Atoi(port)
	return ptKey(c.Method, host, p)
}

// ptCheckOurLog: one line per request; an allowed one names the entry
// (and, for the host, the host-gateway rule) and carries the trace id; a
// refused one says why.
func ptCheckOurLog(t *testing.T, path string, cases []ptCase) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]egress.Decision{}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for _, line := range lines {
		var d egress.Decision
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("decision line %q: %v", line, err)
		}
		got[ptKey(d.Method, d.Host, int(d.Port))] = d
	}
	if len(lines) != len(cases) {
		t.Errorf("%d decision lines for %d requests:\n%s", len(lines), len(cases), b)
	}
	for _, c := range cases {
		d, ok := got[ptCaseKey(t, c)]
		switch {
		case !ok:
			t.Errorf("%s: no decision line for %s", c.Name, ptCaseKey(t, c))
		case c.ours == 200 && (d.Decision != egress.Allow || d.Rule != c.rule || d.CorrelationID != "4bf92f3577b34da6a3ce929d0e0e4736"):
			t.Errorf("%s: decision %+v, want allowed by rule %q with the trace id", c.Name, d, c.rule)
		case c.ours != 200 && (d.Decision != egress.Deny || !strings.Contains(d.Reason, c.reason)):
			t.Errorf("%s: decision %+v, want denied with a reason holding %q", c.Name, d, c.reason)
		default:
			t.Logf("%s: %s %s:%d %s rule=%q reason=%q", c.Name, d.Method, d.Host, d.Port, d.Decision, d.Rule, d.Reason)
		}
	}
}

// ptCheckSquidLog reads Squid's access log through the harness's parser:
// one line per request, each with the decision the case expects, the
// allowed ones dialled to the fixture or to the bridge address.
func ptCheckSquidLog(t *testing.T, path string, cases []ptCase, up, bridge string) {
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
	got := map[string]egress.Decision{}
	for _, d := range ds {
		got[ptKey(d.Method, sqHost(d.Host), int(d.Port))] = d
	}
	if len(ds) != len(cases) {
		t.Errorf("%d squid lines for %d requests: %+v", len(ds), len(cases), ds)
	}
	for _, c := range cases {
		d, ok := got[ptCaseKey(t, c)]
		wantIP := up
		if strings.HasPrefix(c.Name, "host-gateway") {
			wantIP = bridge
		}
		switch {
		case !ok:
			t.Errorf("%s: no squid line for %s in %+v", c.Name, ptCaseKey(t, c), ds)
		case c.squid == 200 && (d.Decision != egress.Allow || d.ResolvedIP != wantIP || d.CorrelationID != "4bf92f3577b34da6a3ce929d0e0e4736"):
			t.Errorf("%s: squid decision %+v, want allowed to %s with the trace id", c.Name, d, wantIP)
		case c.squid != 200 && (d.Decision != egress.Deny || d.Reason != "squid: TCP_DENIED/403"):
			t.Errorf("%s: squid decision %+v, want TCP_DENIED/403", c.Name, d)
		}
	}
}

// ptNetworks: the client's internal network and the gateway's egress
// network, which is not internal so that the gateway has a route to the
// bridge's host address (see the file comment).
func ptNetworks(t *testing.T, id string) (internal, egressNet string) {
	t.Helper()
	internal, egressNet = "mcpsidecar-e2e-"+id+"-pt-internal", "mcpsidecar-e2e-"+id+"-pt-egress"
	for _, n := range []struct {
		name  string
		flags []string
	}{{internal, []string{"--internal"}}, {egressNet, nil}} {
		name := n.name
		t.Cleanup(func() { dockerErr("network", "rm", name) })
		docker(t, append(append([]string{"network", "create"}, n.flags...), "--label", "mcpsidecar.test=1", name)...)
	}
	return internal, egressNet
}

// ptBridgeAddr is this host's address on Docker's default bridge (what
// host-gateway maps to), from the bridge network's IPAM gateway.
func ptBridgeAddr(t *testing.T) netip.Addr {
	t.Helper()
	s := docker(t, "network", "inspect", "bridge", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}")
	if s == "" {
		// Older engines leave the IPAM gateway empty: the bridge's own
		// address is the first of its subnet.
		sub := docker(t, "network", "inspect", "bridge", "-f", "{{range .IPAM.Config}}{{.Subnet}}{{end}}")
		p, err := netip.ParsePrefix(sub)
		if err != nil {
			t.Fatalf("bridge subnet %q: %v", sub, err)
		}
		s = p.Masked().Addr().Next().String()
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		t.Fatalf("bridge gateway %q: %v", s, err)
	}
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, ia := range ifs {
		if n, ok := ia.(*net.IPNet); ok && n.IP.Equal(net.IP(a.AsSlice())) {
			return a
		}
	}
	t.Fatalf("the bridge address %s is not an address of this host", a)
	return netip.Addr{}
}

// ptHostFake serves "fixture host" on this host, bound to the bridge
// address alone (never 0.0.0.0), and returns its port. Port+1 must be
// free too (the refused other-port case names it); a port whose
// successor is taken is passed over.
func ptHostFake(t *testing.T, bridge netip.Addr) int {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(bridge, 0).String())
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if port == 65535 {
			ln.Close()
			continue
		}
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintln(w, "fixture host")
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return port
	}
	t.Fatal("no free port on the bridge address")
	return 0
}

// ptHardenPolicy is gwHardenPolicy with the connect ports the harness
// gives a gateway under cfg (cfg.DialPorts and DNS).
func ptHardenPolicy(cfg netpolicy.Config) string {
	ports := []string{"53"}
	for _, p := range cfg.DialPorts() {
		ports = append(ports, strconv.Itoa(int(p)))
	}
	return strings.Replace(gwHardenPolicy, `"connect_tcp":[53,80,443]`, `"connect_tcp":[`+strings.Join(ports, ",")+`]`, 1)
}

// ptStartOurs is gwStartOurs with the host-gateway mapping and the
// policy's connect ports.
func ptStartOurs(t *testing.T, name, image, internal, egressNet, out string, cfg netpolicy.Config) {
	t.Helper()
	pol, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	create := append(gwCommon(name), "--user", "65532:65532", "--tmpfs", "/tmp:mode=1777",
		"--add-host", netpolicy.HostGateway+":host-gateway",
		"-e", "MCPSIDECAR_GATEWAY_POLICY="+string(pol), "-e", "MCPSIDECAR_RUN_ID=e2e",
		"-e", "MCPSIDECAR_HARDEN_POLICY="+ptHardenPolicy(cfg), "--tmpfs", "/sandbox-work:mode=1777",
		"-v", out+":/sandbox-output", "--entrypoint", "/mcpsidecar", image,
		"gateway", "--listen", ":3128", "--decision-log", "/sandbox-output/egress-decisions.jsonl")
	gwStartGateway(t, name, egressNet, internal, "gateway listening", create)
}

// ptStartSquid is gwStartSquid with the host-gateway mapping.
func ptStartSquid(t *testing.T, name, image, internal, egressNet, out, dir string, cfg netpolicy.Config) {
	t.Helper()
	conf := filepath.Join(dir, "squid-ports.conf")
	if err := os.WriteFile(conf, []byte(spec.SquidConf(cfg)), 0o644); err != nil {
		t.Fatal(err)
	}
	create := append(gwCommon(name), "--add-host", netpolicy.HostGateway+":host-gateway")
	for path, opts := range egress.SquidTmpfs {
		create = append(create, "--tmpfs", path+":"+opts)
	}
	create = append(create, "--user", egress.SquidUser, "-v", out+":/sandbox-output",
		"-v", conf+":"+egress.SquidConfPath+":ro", image)
	gwStartGateway(t, name, egressNet, internal, egress.SquidReadyLine, create)
}

// TestPortsOfflineRun is agent_test.go's offline `run` with the model
// where issue 13 puts it, through each engine: a fixture listening on
// 8081 reached through the entry "fake-model.e2e.test:8081", and a fake
// on this host (bound to the bridge's host address) reached as
// host.docker.internal:PORT. The host run keeps its containers (--keep)
// to show that only the gateway got the host-gateway mapping.
func TestPortsOfflineRun(t *testing.T) {
	NeedDocker(t)
	sqBuildImage(t)
	s := agPrepare(t)
	bridge := ptBridgeAddr(t)
	// The fixtures' addresses on the run's egress network are private
	// (the harness's subnet pool, or Docker's); the bridge's own /16 is
	// left out, so the host is reached by the host-gateway rule alone.
	ips := ptPrivateRanges(t, netip.PrefixFrom(bridge, 16).Masked())
	t.Logf("allowed_ip_addresses %q (the bridge %s left out)", ips, bridge)
	for _, engine := range []string{"ours", "squid"} {
		t.Run(engine+"/name-port", func(t *testing.T) {
			r := ptRun(t, s, engine, ptRunOpts{
				modelURL: "http://" + agModelHost + ":8081/v1",
				domains:  []string{agModelHost + ":8081", agLearnHost},
				ips:      ips,
			})
			runDir := agOnlyRunDir(t, r.runsDir)
			ptCheckRun(t, s, r, runDir)
			ptCheckModelDecisions(t, runDir, engine, agModelHost, 8081, "", agModelHost+":8081")
			agCheckNothingLeft(t, r.id)
		})
		t.Run(engine+"/host-gateway", func(t *testing.T) {
			m, err := fakemodel.New(fakemodel.Task, s.key)
			if err != nil {
				t.Fatal(err)
			}
			port := ptServe(t, bridge, m)
			entry := fmt.Sprintf("%s:%d", netpolicy.HostGateway, port)
			o := ptRunOpts{
				modelURL: "http://" + entry + "/v1",
				domains:  []string{entry, agLearnHost},
				ips:      ips,
				keep:     engine == "ours",
			}
			r := ptRun(t, s, engine, o)
			runDir := agOnlyRunDir(t, r.runsDir)
			ptCheckRun(t, s, r, runDir)
			ptCheckModelDecisions(t, runDir, engine, netpolicy.HostGateway, port, bridge.String(), entry+" "+netpolicy.HostGatewayRule)
			if len(m.Requests()) < 3 {
				t.Errorf("the host fake got %d requests, want the whole task", len(m.Requests()))
			}
			if o.keep {
				ptCheckExtraHosts(t, r.id)
			} else {
				agCheckNothingLeft(t, r.id)
			}
		})
	}
}

type ptRunOpts struct {
	modelURL     string
	domains, ips []string
	keep         bool
}

// ptRun is agSetup.runWith with the model fixture on :8081, the spec's
// allowlist and OPENAI_BASE_URL from o, and the engine.
func ptRun(t *testing.T, s agSetup, engine string, o ptRunOpts) agResult {
	t.Helper()
	r := agResult{id: RandHex(6)}
	r.runsDir = filepath.Join(s.dir, "runs-"+r.id)
	fx := ptStartFixtures(t, r.id, s.image, s.key)
	r.w = agWatch(t, r.id, fx)
	specFile := filepath.Join(s.dir, "sandbox_spec-"+r.id+".toml")
	agWrite(t, specFile, fmt.Sprintf("schema_version = 1\ncapabilities = [\"network\", \"mcp_client\", \"openai_agents\"]\n"+
		"allowed_domains = %s\nallowed_ip_addresses = %s\n", ptTOMLList(o.domains), ptTOMLList(o.ips)))
	args := []string{"run", "--spec", specFile, "--runs-dir", r.runsDir, "--allow-old-engine", "--timeout", "3m",
		"--gateway-engine", engine, "--squid-image", sqImage}
	if o.keep {
		args = append(args, "--keep")
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(os.Environ(),
		"OPENAI_API_KEY="+s.key,
		"OPENAI_BASE_URL="+o.modelURL,
		"MCPSIDECAR_CA_BUNDLE="+s.ca,
		"MCPSIDECAR_LABELS=mcpsidecar.test=1,mcpsidecar.e2e="+r.id,
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t.Cleanup(func() { agRemoveLeftovers(r.id, fx) })
	t.Cleanup(func() {
		if t.Failed() {
			agDumpRun(t, r.runsDir)
		}
	})
	done := make(chan error, 1)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case r.err = <-done:
	case <-time.After(5 * time.Minute):
		cmd.Process.Kill()
		r.err = fmt.Errorf("timed out: %v", <-done)
	}
	r.wall = time.Since(start)
	r.stdout, r.stderr = stdout.String(), stderr.String()
	t.Logf("mcpsidecar %s (OPENAI_BASE_URL=%s) took %s; stderr:\n%s", strings.Join(args, " "), o.modelURL, r.wall.Round(time.Millisecond), r.stderr)
	r.w.stop()
	r.w.checkOrder(t)
	if r.err != nil {
		t.Fatalf("mcpsidecar run: %v\nstdout:\n%s", r.err, r.stdout)
	}
	return r
}

func ptTOMLList(xs []string) string {
	b, _ := json.Marshal(xs) // a list of plain strings is valid TOML as JSON writes it
	return string(b)
}

// ptStartFixtures is agStartFixtures with the model listening on 8081.
func ptStartFixtures(t *testing.T, id, image, key string) agFixtures {
	t.Helper()
	fx := agFixtures{network: "mcpsidecar-e2e-" + id + "-fixtures", model: "mcpsidecar-e2e-" + id + "-model", learn: "mcpsidecar-e2e-" + id + "-learn"}
	t.Cleanup(func() { dockerErr("network", "rm", fx.network) })
	docker(t, "network", "create", "--internal", "--label", "mcpsidecar.test=1", fx.network)
	common := []string{"run", "-d", "--label", "mcpsidecar.test=1", "--network", fx.network, "--read-only",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", "65532:65532",
		"--sysctl", "net.ipv4.ip_unprivileged_port_start=0", "--memory", "128m", "--pids-limit", "64"}
	for _, c := range []struct {
		name string
		args []string
	}{
		{fx.model, []string{"model", "--listen", ":8081", "--key", key, "--behaviour", string(fakemodel.Task)}},
		{fx.learn, []string{"learn", "--listen", ":443", "--path", "/api/mcp", "--tls-cert", "/certs/learn.pem", "--tls-key", "/certs/learn-key.pem"}},
	} {
		name := c.name
		t.Cleanup(func() { dockerErr("rm", "-f", name) })
		docker(t, append(append(append([]string{}, common...), "--name", name, image), c.args...)...)
	}
	return fx
}

// ptServe serves h on this host, bound to the bridge address alone, and
// returns the port.
func ptServe(t *testing.T, bridge netip.Addr, h http.Handler) int {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(bridge, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// ptCheckRun: the answer, the audit, no secret anywhere.
func ptCheckRun(t *testing.T, s agSetup, r agResult, runDir string) {
	t.Helper()
	agCheckAnswer(t, runDir, r.stdout)
	agCheckAudit(t, runDir)
	agCheckNoSecret(t, runDir, s.key)
}

// ptCheckModelDecisions: every decision of the run is an allow, and each
// model request of agent-turns.jsonl has one for host:port joined by its
// correlation id, dialled to ip when set; our gateway names the rule:
// ruleWant, or ruleWant and more (the IP rule a name needed, the
// credential it added).
func ptCheckModelDecisions(t *testing.T, runDir, engine, host string, port int, ip, ruleWant string) {
	t.Helper()
	byID := map[string]egress.Decision{}
	for _, line := range agLines(t, filepath.Join(runDir, "egress-decisions.jsonl")) {
		var d egress.Decision
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("decision line %q: %v", line, err)
		}
		if d.Decision != egress.Allow {
			t.Errorf("gateway denied a request of the run: %s", line)
		}
		if d.CorrelationID != "" && d.Host == host {
			byID[d.CorrelationID] = d
		}
	}
	models := 0
	for _, tr := range agTurns(t, runDir) {
		if tr.Kind != "model_request" {
			continue
		}
		models++
		d, ok := byID[tr.CorrelationID]
		ruleOK := d.Rule == ruleWant || strings.HasPrefix(d.Rule, ruleWant+" ")
		switch {
		case !ok || int(d.Port) != port:
			t.Errorf("model request %s has no allowed decision for %s:%d (got %+v)", tr.CorrelationID, host, port, d)
		case ip != "" && d.ResolvedIP != ip:
			t.Errorf("model request %s was dialled to %q, want %s", tr.CorrelationID, d.ResolvedIP, ip)
		case engine == "ours" && !ruleOK:
			t.Errorf("model request %s allowed by rule %q, want %q", tr.CorrelationID, d.Rule, ruleWant)
		}
	}
	if models < 3 {
		t.Errorf("agent-turns.jsonl has %d model requests, want at least 3", models)
	}
}

// ptCheckExtraHosts inspects the containers the run kept: the gateway
// maps host.docker.internal to host-gateway, the agent and the sidecar
// keep it black-holed at 0.0.0.0.
func ptCheckExtraHosts(t *testing.T, id string) {
	t.Helper()
	want := map[string]string{
		"gateway": netpolicy.HostGateway + ":host-gateway",
		"agent":   netpolicy.HostGateway + ":0.0.0.0",
		"sidecar": netpolicy.HostGateway + ":0.0.0.0",
	}
	for role, entry := range want {
		ids := strings.Fields(docker(t, "ps", "-aq", "--filter", "label=mcpsidecar.e2e="+id, "--filter", "label=mcpsidecar.role="+role))
		if len(ids) != 1 {
			t.Errorf("%d kept %s containers, want 1", len(ids), role)
			continue
		}
		var hosts []string
		if err := json.Unmarshal([]byte(docker(t, "inspect", "-f", "{{json .HostConfig.ExtraHosts}}", ids[0])), &hosts); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, h := range hosts {
			if strings.HasPrefix(h, netpolicy.HostGateway+":") {
				n++
				if h != entry {
					t.Errorf("%s: ExtraHosts entry %q, want %q", role, h, entry)
				}
			}
		}
		if n != 1 {
			t.Errorf("%s: ExtraHosts %q, want exactly one %s entry (%q)", role, hosts, netpolicy.HostGateway, entry)
		}
		t.Logf("%s ExtraHosts %q", role, hosts)
	}
}

// ptPrivateRanges is the RFC 1918 ranges without hole.
func ptPrivateRanges(t *testing.T, hole netip.Prefix) []string {
	t.Helper()
	var out []string
	for _, s := range []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"} {
		for _, p := range ptSubtract(netip.MustParsePrefix(s), hole) {
			out = append(out, p.String())
		}
	}
	return out
}

// ptSubtract is p without hole, as prefixes (IPv4).
func ptSubtract(p, hole netip.Prefix) []netip.Prefix {
	switch {
	case !p.Overlaps(hole):
		return []netip.Prefix{p}
	case p.Bits() >= hole.Bits():
		return nil
	}
	a := p.Addr().As4()
	hi := binary.BigEndian.Uint32(a[:]) + 1<<(31-p.Bits())
	binary.BigEndian.PutUint32(a[:], hi)
	lo := netip.PrefixFrom(p.Addr(), p.Bits()+1)
	up := netip.PrefixFrom(netip.AddrFrom4(a), p.Bits()+1)
	return append(ptSubtract(lo, hole), ptSubtract(up, hole)...)
}
