//go:build docker

package e2e

// Issue 17, item 6: declared [[mcp_servers]] end to end. Two fake MCP
// servers (internal/sidecar/mcpfake, `fixture mcp`) run as fixture
// containers answering as mcp-a.e2e.test (https, with the test CA's
// certificate, which agCerts issues for it too) and mcp-b.e2e.test:8080
// (plain http, a host:port entry of the allowlist) on the run's
// egress network; server a requires a bearer token that the spec gives
// through [[credentials]] from a host variable. The workload is
// e2e/fixtures/cmd/mcpcall in a FROM-scratch image (`run --image`): the
// built-in agent's scripted model calls only the Learn tools. Nothing
// leaves the machine: the fixtures' names exist only on the run's networks.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	mcpHostA = "mcp-a.e2e.test"
	mcpHostB = "mcp-b.e2e.test"
	mcpURLA  = "https://" + mcpHostA + "/mcp" // a credential goes only over https
	mcpURLB  = "http://" + mcpHostB + ":8080/mcp"
	// mcpFetchB is server b's host in an https URL, as server a's own
	// scheme: an argument that only the host check can refuse.
	mcpFetchB = "https://" + mcpHostB + "/mcp"
)

// mcpSpec is the two-server spec; driftA is server a's on_drift.
func mcpSpec(driftA string) string {
	return `schema_version = 1
capabilities = ["network", "mcp_client", "openai_agents"]
allowed_domains = ["` + agModelHost + `", "` + mcpHostA + `", "` + mcpHostB + `:8080"]
# The fixtures get addresses on the run's own egress network.
allowed_ip_addresses = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]

[[mcp_servers]]
name = "a"
url = "` + mcpURLA + `"
tools = ["echo_a", "fetch_a"]
on_drift = "` + driftA + `"

[[mcp_servers]]
name = "b"
url = "` + mcpURLB + `"
tools = ["echo_b"]

[[credentials]]
host = "` + mcpHostA + `"
header = "Authorization"
format = "Bearer {value}"
from_host = "E2E_MCP_A_TOKEN"
`
}

// mcpRun is one `mcpsidecar run --image` of the mcpcall workload with the
// two MCP fixtures (a's tool descriptions extended by describeA).
type mcpRun struct {
	*crRun
	fixA, fixB string
	steps      map[string]mcpStep
}

type mcpStep struct {
	Step   string `json:"step"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// mcpWorkloadImage is FROM scratch with mcpcall and its arguments.
func mcpWorkloadImage(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx := filepath.Join(dir, "mcpcall-"+RandHex(4))
	if err := os.MkdirAll(ctx, 0o755); err != nil {
		t.Fatal(err)
	}
	goBuild(t, "./e2e/fixtures/cmd/mcpcall", filepath.Join(ctx, "mcpcall"))
	cmd, _ := json.Marshal(append([]string{"/mcpcall"}, args...))
	agWrite(t, filepath.Join(ctx, "Dockerfile"), "FROM scratch\nCOPY mcpcall /mcpcall\nCMD "+string(cmd)+"\n")
	image := "mcpsidecar-e2e-mcpcall:" + RandHex(6)
	t.Cleanup(func() { dockerErr("rmi", "-f", image) })
	docker(t, "build", "-q", "--label", "mcpsidecar.test=1", "-t", image, ctx)
	return image
}

// mcpStart starts the fixtures and the run; specFile is written with spec.
func mcpStart(t *testing.T, s agSetup, specFile, spec, token, describeA, workload string) *mcpRun {
	t.Helper()
	r := &mcpRun{crRun: &crRun{id: RandHex(6), done: make(chan error, 1)}}
	r.runsDir = filepath.Join(s.dir, "runs-"+r.id)
	fx := agStartFixtures(t, r.id, s.image, s.key, "task")
	common := []string{"run", "-d", "--label", "mcpsidecar.test=1", "--network", fx.network, "--read-only",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", "65532:65532", "--sysctl", "net.ipv4.ip_unprivileged_port_start=0", "--memory", "128m", "--pids-limit", "64"}
	r.fixA, r.fixB = "mcpsidecar-e2e-"+r.id+"-mcp-a", "mcpsidecar-e2e-"+r.id+"-mcp-b"
	for _, c := range []struct {
		name string
		args []string
	}{
		{r.fixA, []string{"mcp", "--listen", ":443", "--tls-cert", "/certs/learn.pem", "--tls-key", "/certs/learn-key.pem", "--path", "/mcp", "--name", "a", "--tools", "echo_a,fetch_a", "--token", token, "--describe", describeA}},
		{r.fixB, []string{"mcp", "--listen", ":8080", "--path", "/mcp", "--name", "b", "--tools", "echo_b"}},
	} {
		name := c.name
		t.Cleanup(func() { dockerErr("rm", "-f", name) })
		docker(t, append(append(append([]string{}, common...), "--name", name, s.image), c.args...)...)
	}
	fx.extra = []agAlias{{r.fixA, mcpHostA}, {r.fixB, mcpHostB}}
	r.w = agWatch(t, r.id, fx)
	agWrite(t, specFile, spec)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	r.cmd = exec.CommandContext(ctx, s.bin, "run", "--spec", specFile, "--runs-dir", r.runsDir, "--allow-old-engine", "--timeout", "3m",
		"--image", workload, "--pull", "never")
	r.cmd.Env = append(os.Environ(),
		"OPENAI_API_KEY="+s.key,
		"OPENAI_BASE_URL=http://"+agModelHost+"/v1",
		"MCPSIDECAR_CA_BUNDLE="+s.ca,
		"E2E_MCP_A_TOKEN="+token,
		"MCPSIDECAR_LABELS=mcpsidecar.test=1,mcpsidecar.e2e="+r.id,
	)
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	t.Cleanup(func() { agRemoveLeftovers(r.id, fx) })
	t.Cleanup(func() {
		if t.Failed() {
			agDumpRun(t, r.runsDir)
			for _, c := range []string{r.fixA, r.fixB} {
				out, _ := dockerErr("logs", c)
				t.Logf("fixture %s log:\n%s", c, out)
			}
		}
	})
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	return r
}

// finish waits for the run and reads the workload's steps from stdout.
func (r *mcpRun) finish(t *testing.T) error {
	t.Helper()
	err := r.wait(t)
	r.w.checkOrder(t)
	r.steps = map[string]mcpStep{}
	for _, line := range strings.Split(r.stdout.String(), "\n") {
		var st mcpStep
		if json.Unmarshal([]byte(line), &st) == nil && st.Step != "" {
			r.steps[st.Step] = st
			t.Logf("workload step %-40s ok=%v %.300s", st.Step, st.OK, st.Detail)
		}
	}
	return err
}

func (r *mcpRun) step(t *testing.T, name string) mcpStep {
	t.Helper()
	st, ok := r.steps[name]
	if !ok {
		t.Fatalf("the workload reported no step %q (stdout:\n%s)", name, r.stdout.String())
	}
	return st
}

// mcpFixtureLog is the MCP request lines of a fixture's log.
type mcpFixtureLine struct {
	Fixture, Server, RPC, Tool string
	Auth                       string `json:"authorization_sha256"`
	Status                     int
}

func mcpFixtureLog(t *testing.T, container string) []mcpFixtureLine {
	t.Helper()
	out := docker(t, "logs", container)
	var lines []mcpFixtureLine
	for _, l := range strings.Split(out, "\n") {
		var m mcpFixtureLine
		// logMCP's lines (logRequests' lines carry no authorization field)
		if strings.Contains(l, `"authorization_sha256"`) && json.Unmarshal([]byte(l), &m) == nil && m.Fixture == "mcp" {
			lines = append(lines, m)
		}
	}
	return lines
}

// mcpAudit is the run's audit lines.
func mcpAudit(t *testing.T, runDir string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range agLines(t, agFind(t, runDir, "mcp-sidecar-tool-calls.jsonl")) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestMCPServersTwoServers(t *testing.T) {
	NeedDocker(t)
	s := agPrepare(t)
	token := "e2e-mcp-a-token-" + RandHex(16)
	workload := mcpWorkloadImage(t, s.dir, "--impersonate", "b="+mcpURLB,
		"echo_a", "echo_b", "fetch_a="+mcpFetchB)
	r := mcpStart(t, s, filepath.Join(s.dir, "sandbox_spec.toml"), mcpSpec("fail"), token, "", workload)
	var agentInspect, sidecarInspect []byte
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sidecarInspect = crInspect(t, r.id, "sidecar", 2*time.Minute)
		agentInspect = crInspect(t, r.id, "agent", 2*time.Minute)
	}()
	err := r.finish(t)
	wg.Wait()
	if err != nil {
		t.Logf("mcpsidecar run: %v (stdout:\n%s)", err, r.stdout.String())
	}
	runDir := agOnlyRunDir(t, r.runsDir)

	// Both calls answered, by their own server.
	for _, c := range []struct{ step, server string }{{"call echo_a", "a"}, {"call echo_b", "b"}} {
		if st := r.step(t, c.step); !st.OK || !strings.Contains(st.Detail, "echo_") {
			t.Errorf("%s: ok=%v %s; want the server's answer", c.step, st.OK, st.Detail)
		}
	}
	// An argument pointing a's tool at b's host is refused.
	// (https, so that it is the host, not the scheme, that is refused; the
	// sidecar refuses it before sending, so no request and no decision line
	// exists for it.)
	if st := r.step(t, "call fetch_a="+mcpFetchB); st.OK || !strings.Contains(st.Detail, "host") {
		t.Errorf("fetch_a with b's host was not refused for its host: ok=%v %s", st.OK, st.Detail)
	}
	// A workload claiming the sidecar's scope is refused.
	if st := r.step(t, "impersonate b"); st.OK || !strings.Contains(st.Detail, "403") {
		t.Errorf("the impersonating request was not refused with 403: ok=%v %s", st.OK, st.Detail)
	}

	// Audit: each call names its server; fetch_a's refusal is a's.
	seen := map[string]map[string]any{}
	for _, a := range mcpAudit(t, runDir) {
		if a["kind"] == "tool" || a["kind"] == "tools/call" || a["name"] == "echo_a" || a["name"] == "echo_b" || a["name"] == "fetch_a" {
			if n, _ := a["name"].(string); n != "" {
				seen[n] = a
			}
		}
	}
	for tool, server := range map[string]string{"echo_a": "a", "echo_b": "b", "fetch_a": "a"} {
		a, ok := seen[tool]
		if !ok {
			t.Errorf("no audit line for %s", tool)
			continue
		}
		if a["server"] != server {
			t.Errorf("audit line of %s names server %v, want %q", tool, a["server"], server)
		}
		if want := tool != "fetch_a"; a["ok"] != want {
			t.Errorf("audit line of %s ok=%v, want %v: %v", tool, a["ok"], want, a)
		}
	}

	// The token reached a on every request and b never; b got no
	// Authorization header at all.
	sum := sha256.Sum256([]byte("Bearer " + token))
	want := hex.EncodeToString(sum[:])
	linesA, linesB := mcpFixtureLog(t, r.fixA), mcpFixtureLog(t, r.fixB)
	calls := map[string]int{}
	for _, l := range linesA {
		if l.Auth != want {
			t.Errorf("server a got a request without the token (rpc %q, status %d)", l.RPC, l.Status)
		}
		calls[l.Tool]++
	}
	for _, l := range linesB {
		if l.Auth != "" {
			t.Errorf("server b got an Authorization header (rpc %q): a credential leaked to it", l.RPC)
		}
		calls[l.Tool]++
	}
	if calls["echo_a"] != 1 || calls["echo_b"] != 1 || calls["fetch_a"] != 0 {
		t.Errorf("tools/calls the fixtures served: %v; want echo_a and echo_b once, fetch_a never", calls)
	}

	// The token is in no file of the run and in neither container.
	agCheckNoSecret(t, runDir, token)
	for role, b := range map[string][]byte{"agent": agentInspect, "sidecar": sidecarInspect} {
		if b == nil {
			continue // crInspect reported it
		}
		if strings.Contains(string(b), token) {
			t.Errorf("docker inspect of the %s container contains server a's token", role)
		}
	}

	// Decision lines: the impersonation is refused under the agent's
	// claimed scope; a's and b's requests are judged under their own.
	var imperson bool
	scopes := map[string]bool{}
	for _, d := range crDecisions(t, runDir) {
		sc, _ := d["scope"].(string)
		scopes[sc] = true
		if d["decision"] == "deny" && strings.Contains(jsonString(d), "impersonation") {
			imperson = true
		}
		if strings.HasPrefix(sc, "sidecar/a") && d["host"] != mcpHostA || strings.HasPrefix(sc, "sidecar/b") && d["host"] != mcpHostB {
			if d["decision"] == "allow" {
				t.Errorf("a request under scope %s to %v was allowed", sc, d["host"])
			}
		}
	}
	if !imperson {
		t.Errorf("no decision line refuses the impersonation; scopes seen: %v", scopes)
	}
	for _, sc := range []string{"sidecar/a/echo_a", "sidecar/b/echo_b"} {
		if !scopes[sc] {
			t.Errorf("no decision line under scope %s; scopes seen: %v", sc, scopes)
		}
	}
	agCheckNothingLeft(t, r.id)
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestMCPServersDrift: the first run pins server a's tools in the lock
// file beside the spec; the fixture then changes a description, and the
// next run refuses a (on_drift = "fail") or serves it with a warning
// ("warn").
func TestMCPServersDrift(t *testing.T) {
	NeedDocker(t)
	s := agPrepare(t)
	token := "e2e-mcp-a-token-" + RandHex(16)
	workload := mcpWorkloadImage(t, s.dir, "echo_a", "echo_b")
	specFile := filepath.Join(s.dir, "sandbox_spec.toml")
	lock := filepath.Join(s.dir, "sandbox_spec.mcp-lock.json")

	r := mcpStart(t, s, specFile, mcpSpec("fail"), token, "", workload)
	if err := r.finish(t); err != nil {
		t.Fatalf("first run: %v\nstdout:\n%s", err, r.stdout.String())
	}
	b, err := os.ReadFile(lock)
	if err != nil {
		t.Fatalf("the first run wrote no lock file: %v", err)
	}
	if !strings.Contains(string(b), "echo_a") || !strings.Contains(string(b), "echo_b") {
		t.Fatalf("lock file lacks the tools:\n%s", b)
	}
	if !r.step(t, "call echo_a").OK {
		t.Fatal("first run: echo_a was not served")
	}

	for _, c := range []struct {
		drift  string
		served bool
	}{{"fail", false}, {"warn", true}} {
		t.Run(c.drift, func(t *testing.T) {
			r := mcpStart(t, s, specFile, mcpSpec(c.drift), token, " Changed.", workload)
			err := r.finish(t)
			t.Logf("run: %v", err)
			runDir := agOnlyRunDir(t, r.runsDir)
			if st := r.step(t, "call echo_a"); st.OK != c.served {
				t.Errorf("echo_a after the drift: ok=%v %s; want served=%v", st.OK, st.Detail, c.served)
			}
			if st := r.step(t, "call echo_b"); !st.OK {
				t.Errorf("echo_b (server b, unchanged) not served: %s", st.Detail)
			}
			var pin map[string]any
			for _, a := range mcpAudit(t, runDir) {
				if a["kind"] == "pin_check" && a["server"] == "a" {
					pin = a
				}
			}
			if pin == nil {
				t.Fatal("no pin_check audit line for server a")
			} else if pin["ok"] != c.served || !strings.Contains(jsonString(pin), "echo_a") {
				t.Errorf("pin_check line %v; want ok=%v naming echo_a", pin, c.served)
			}
			// `runs show` says so (docs/mcp-servers.md, Pinning).
			show, err := exec.Command(s.bin, "runs", "show", runDir).CombinedOutput()
			if err != nil {
				t.Fatalf("runs show: %v\n%s", err, show)
			}
			want := map[string]string{"fail": "MCP server a refused", "warn": "allowed with a warning"}[c.drift]
			if !strings.Contains(string(show), want) {
				t.Errorf("runs show does not say %q:\n%s", want, show)
			}
			// Nor does the run's own output (a finding, logged, not asserted:
			// the drift is in the audit, the sidecar's log and runs show).
			if said := r.stderr.String() + r.stdout.String(); !strings.Contains(said, "server a") {
				t.Logf("FINDING: the run's printed output does not mention server a's drift (on_drift = %q)", c.drift)
			}
			if after, _ := os.ReadFile(lock); string(after) != string(b) {
				t.Error("a run changed the lock file after a drift (only `mcp pin --update` may)")
			}
		})
	}
}
