//go:build docker

package e2e

// Issue 15: the model API key never enters the sandbox. The offline run
// (agent_test.go's fixtures: a fake model that answers only with the real
// key, a fake Learn server) shows that the model received the real key
// while the agent's container and every file of the run directory held
// only the placeholder; a second run, whose workload sleeps, lets a
// hostile stand-in on the run's internal network send the placeholder to
// another allowed host, which the gateway refuses and records.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/probe"
)

// crRun is one `mcpsidecar run` started in the background, with its id
// known before it starts so the test can find its containers.
type crRun struct {
	id, runsDir    string
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan error
	w              *agWatcher
}

func crStart(t *testing.T, s agSetup, behaviour string, extra ...string) *crRun {
	t.Helper()
	return crStartCmd(t, s, "run", behaviour, extra...)
}

// crStartCmd is crStart for command (run or doctor).
func crStartCmd(t *testing.T, s agSetup, command, behaviour string, extra ...string) *crRun {
	t.Helper()
	r := &crRun{id: RandHex(6), done: make(chan error, 1)}
	r.runsDir = filepath.Join(s.dir, "runs-"+r.id)
	fx := agStartFixtures(t, r.id, s.image, s.key, behaviour)
	r.w = agWatch(t, r.id, fx)
	specFile := filepath.Join(s.dir, "spec-"+r.id+".toml")
	agWrite(t, specFile, `schema_version = 1
capabilities = ["network", "mcp_client", "openai_agents"]
allowed_domains = ["`+agModelHost+`", "`+agLearnHost+`"]
# The fixtures get addresses from Docker's pools (or the harness's own) on
# the run's egress network; nothing else on these ranges is reachable there.
allowed_ip_addresses = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
`)
	args := append([]string{command, "--spec", specFile, "--runs-dir", r.runsDir, "--allow-old-engine", "--timeout", "3m"}, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	r.cmd = exec.CommandContext(ctx, s.bin, args...)
	r.cmd.Env = append(os.Environ(),
		"OPENAI_API_KEY="+s.key,
		"OPENAI_BASE_URL=http://"+agModelHost+"/v1",
		"MCPSIDECAR_CA_BUNDLE="+s.ca,
		"MCPSIDECAR_LABELS=mcpsidecar.test=1,mcpsidecar.e2e="+r.id,
	)
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	t.Cleanup(func() { agRemoveLeftovers(r.id, fx) })
	t.Cleanup(func() {
		if t.Failed() {
			agDumpRun(t, r.runsDir)
		}
	})
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	return r
}

func (r *crRun) wait(t *testing.T) error {
	t.Helper()
	err := <-r.done
	t.Logf("mcpsidecar run %s: %v; stderr:\n%s", r.id, err, r.stderr.String())
	r.w.stop()
	return err
}

// crInspect is `docker inspect` of the run's container of role, as soon
// as it exists (raw JSON, so that every field is searched), or nil. It
// may run on another goroutine, so it reports with Errorf. A created
// container counts (its configuration is all there): the harness creates
// every container ahead, and a short workload (mcpcall) runs for less
// than a poll of running containers may take.
func crInspect(t *testing.T, id, role string, timeout time.Duration) []byte {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		out, _ := dockerErr("ps", "-aq", "--filter", "label=mcpsidecar.e2e="+id, "--filter", "label=mcpsidecar.role="+role)
		if c := strings.TrimSpace(out); c != "" {
			b, err := exec.Command("docker", "inspect", strings.Fields(c)[0]).Output()
			if err == nil {
				return b
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("no %s container of run %s within %s", role, id, timeout)
	return nil
}

// crWaitRunning waits until the run's container of role is running.
func crWaitRunning(t *testing.T, id, role string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		out, _ := dockerErr("ps", "-q", "--filter", "status=running", "--filter", "label=mcpsidecar.e2e="+id, "--filter", "label=mcpsidecar.role="+role)
		if strings.TrimSpace(out) != "" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the %s container of run %s was not running within %s", role, id, timeout)
}

// crEnv is the Env of a `docker inspect` document, as NAME -> value.
func crEnv(t *testing.T, inspect []byte) map[string]string {
	t.Helper()
	if inspect == nil {
		t.FailNow() // crInspect said why
	}
	var docs []struct{ Config struct{ Env []string } }
	if err := json.Unmarshal(inspect, &docs); err != nil || len(docs) != 1 {
		t.Fatalf("docker inspect: %v", err)
	}
	env := map[string]string{}
	for _, kv := range docs[0].Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// crDecisions are the run's decision lines.
func crDecisions(t *testing.T, runDir string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range agLines(t, filepath.Join(runDir, "egress-decisions.jsonl")) {
		var d map[string]any
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("decision line %q: %v", line, err)
		}
		out = append(out, d)
	}
	return out
}

func TestCredentialHeldByGateway(t *testing.T) {
	NeedDocker(t)
	s := agPrepare(t)
	r := crStart(t, s, "task")
	var agentInspect, gatewayInspect []byte
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		gatewayInspect = crInspect(t, r.id, "gateway", 2*time.Minute)
		agentInspect = crInspect(t, r.id, "agent", 2*time.Minute)
	}()
	err := r.wait(t)
	wg.Wait()
	if err != nil {
		t.Fatalf("mcpsidecar run: %v\nstdout:\n%s", err, r.stdout.String())
	}
	// The fake model answers only requests bearing the real key (401
	// otherwise), so an answer proves the key reached the model.
	runDir := agOnlyRunDir(t, r.runsDir)
	agCheckAnswer(t, runDir, r.stdout.String())

	agentEnv := crEnv(t, agentInspect)
	placeholder := agentEnv["OPENAI_API_KEY"]
	// The harness writes the placeholder, the probe recognises its shape.
	if !probe.IsPlaceholder(placeholder) {
		t.Errorf("agent OPENAI_API_KEY = %q, want the run's placeholder", placeholder)
	}
	if want := "http://egress-gateway:3129/" + agModelHost + "/v1"; agentEnv["OPENAI_BASE_URL"] != want {
		t.Errorf("agent OPENAI_BASE_URL = %q, want %q", agentEnv["OPENAI_BASE_URL"], want)
	}
	if bytes.Contains(agentInspect, []byte(s.key)) {
		t.Error("docker inspect of the agent container contains the real key")
	}
	if gwEnv := crEnv(t, gatewayInspect); gwEnv["OPENAI_API_KEY"] != s.key {
		t.Error("the gateway does not hold the real key")
	}
	agCheckNoSecret(t, runDir, s.key)
	md := crMetadata(t, runDir)
	crWantCredential(t, md, "gateway")
	crWantCheck(t, md, "credentials held by the gateway stayed there")

	injected := 0
	for _, d := range crDecisions(t, runDir) {
		if d["credential"] == "injected" {
			injected++
			if d["host"] != agModelHost || d["decision"] != "allow" || d["correlation_id"] == "" {
				t.Errorf("injected decision %v", d)
			}
		}
	}
	if injected == 0 {
		t.Error("no decision line says a credential was injected")
	}
	agCheckNothingLeft(t, r.id)
}

// TestPlaceholderToOtherHostRefused: a workload holding the placeholder
// sends it to learn.microsoft.com, an allowed host with no credential,
// through the credential listener and through the proxy port; both are
// refused and recorded, and neither reaches the Learn fixture.
func TestPlaceholderToOtherHostRefused(t *testing.T) {
	NeedDocker(t)
	s := agPrepare(t)
	r := crStart(t, s, "task", "--x-workload-cmd", "x-sleep,25s")
	agentEnv := crEnv(t, crInspect(t, r.id, "agent", 2*time.Minute))
	placeholder := agentEnv["OPENAI_API_KEY"]
	// The stand-in joins the internal network with an address the engine
	// picks; the agent's fixed address there is only taken when the agent
	// starts (it is created ahead), so wait until it runs (it sleeps 25 s).
	crWaitRunning(t, r.id, "agent", 2*time.Minute)
	if placeholder == "" {
		t.Fatal("the agent holds no placeholder")
	}
	send := func(args ...string) map[string]any {
		out := r.sendFromInside(t, s, args...)
		var res map[string]any
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("send output %q: %v", out, err)
		}
		return res
	}
	bearer := "Authorization: Bearer " + placeholder
	viaListener := send("--url", "http://egress-gateway:3129/"+agLearnHost+"/api/mcp", "--header", bearer)
	viaProxy := send("--url", "http://"+agLearnHost+"/api/mcp", "--proxy", "http://egress-gateway:3128", "--header", bearer)
	if err := r.wait(t); err != nil {
		t.Logf("the sleeping workload's run ended with %v (expected: it saves no answer)", err)
	}
	for name, res := range map[string]map[string]any{"credential listener": viaListener, "proxy": viaProxy} {
		if res["status"] != float64(403) {
			t.Errorf("%s: got %v, want 403", name, res)
		}
	}
	runDir := agOnlyRunDir(t, r.runsDir)
	var reasons []string
	for _, d := range crDecisions(t, runDir) {
		// The sidecar's own CONNECT tunnels to Learn are allowed; the
		// stand-in's requests are the POSTs.
		if d["host"] == agLearnHost && d["method"] == "POST" {
			if d["decision"] != "deny" {
				t.Errorf("the placeholder's request to %s was allowed: %v", agLearnHost, d)
			}
			reasons = append(reasons, d["reason"].(string))
		}
	}
	all := strings.Join(reasons, "\n")
	if len(reasons) != 2 || !strings.Contains(all, "no credential is declared for "+agLearnHost) || !strings.Contains(all, "placeholder") {
		t.Errorf("decisions for %s: %q, want the two refusals", agLearnHost, reasons)
	}
	agCheckNoSecret(t, runDir, s.key)
	agCheckNothingLeft(t, r.id)
}

// TestCredentialSquidKeepsKeyInSandbox: the Squid engine cannot hold
// credentials (it would have to terminate TLS), so with it the real key
// is in the agent's environment, as before issue 15, and the run says so
// in run-metadata.json's degradations.
func TestCredentialSquidKeepsKeyInSandbox(t *testing.T) {
	sqBuildImage(t)
	s := agPrepare(t)
	r := crStart(t, s, "task", "--gateway-engine", "squid", "--squid-image", sqImage)
	agentInspect := crInspect(t, r.id, "agent", 2*time.Minute)
	if err := r.wait(t); err != nil {
		t.Fatalf("mcpsidecar run --gateway-engine squid: %v\nstdout:\n%s", err, r.stdout.String())
	}
	runDir := agOnlyRunDir(t, r.runsDir)
	agCheckAnswer(t, runDir, r.stdout.String())
	env := crEnv(t, agentInspect)
	if env["OPENAI_API_KEY"] != s.key || env["OPENAI_BASE_URL"] != "http://"+agModelHost+"/v1" {
		t.Errorf("agent OPENAI_API_KEY is not the real key, or OPENAI_BASE_URL = %q is not the host's", env["OPENAI_BASE_URL"])
	}
	md := crMetadata(t, runDir)
	crWantCredential(t, md, "sandbox")
	if !strings.Contains(strings.Join(md.Degradations, "\n"), "the Squid gateway engine cannot hold credentials") {
		t.Errorf("run-metadata.json degradations %q do not record the key in the sandbox", md.Degradations)
	}
	agCheckNoSecret(t, runDir, s.key)
	agCheckNothingLeft(t, r.id)
}

// crMeta is the part of run-metadata.json these tests read.
type crMeta struct {
	Degradations []string `json:"degradations"`
	Credentials  []struct {
		Variable, Host, Lives string
	} `json:"credentials"`
	Verdict struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Name, Detail string
			OK           bool
		} `json:"checks"`
	} `json:"verdict"`
}

func crMetadata(t *testing.T, runDir string) crMeta {
	t.Helper()
	var md crMeta
	if err := json.Unmarshal([]byte(agRead(t, filepath.Join(runDir, "run-metadata.json"))), &md); err != nil {
		t.Fatal(err)
	}
	return md
}

// crWantCredential: the run records OPENAI_API_KEY, for the fake model's
// host, as living where lives says.
func crWantCredential(t *testing.T, md crMeta, lives string) {
	t.Helper()
	if len(md.Credentials) != 1 || md.Credentials[0].Variable != "OPENAI_API_KEY" || md.Credentials[0].Host != agModelHost ||
		md.Credentials[0].Lives != lives {
		t.Errorf("run-metadata.json credentials %+v, want OPENAI_API_KEY for %s in the %s", md.Credentials, agModelHost, lives)
	}
}

// crWantCheck: the verdict has the named check, passed.
func crWantCheck(t *testing.T, md crMeta, name string) {
	t.Helper()
	for _, c := range md.Verdict.Checks {
		if c.Name == name {
			if !c.OK {
				t.Errorf("verdict check %q failed: %s", name, c.Detail)
			}
			return
		}
	}
	t.Errorf("the verdict has no check %q: %+v", name, md.Verdict.Checks)
}

// TestCredentialDoctorRefusal: doctor, with the host holding a (fake) key
// for the fake model, proves the gateway refuses a model request without
// the run's placeholder and with a wrong one: the agent's check row, the
// two refusals in the decision log (nothing injected, so the model was
// never reached), and the host's own checks in the verdict.
func TestCredentialDoctorRefusal(t *testing.T) {
	NeedDocker(t)
	s := agPrepare(t)
	r := crStartCmd(t, s, "doctor", "task")
	if err := r.wait(t); err != nil {
		t.Fatalf("mcpsidecar doctor: %v\nstdout:\n%s", err, r.stdout.String())
	}
	out := r.stdout.String()
	row := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, agent.CheckPlaceholderRequired) {
			row = line
		}
	}
	if !strings.Contains(row, " ok ") || !strings.Contains(row, "no Authorization: refused 401") || !strings.Contains(row, "a wrong placeholder: refused 403") {
		t.Errorf("doctor's check row %q, want ok with both refusals\n%s", row, out)
	}
	runDir := agOnlyRunDir(t, r.runsDir)
	md := crMetadata(t, runDir)
	if !md.Verdict.OK {
		t.Errorf("doctor's verdict failed: %+v", md.Verdict.Checks)
	}
	crWantCredential(t, md, "gateway")
	for _, name := range []string{agent.CheckPlaceholderRequired, "gateway recorded the refused model requests", "credentials held by the gateway stayed there"} {
		crWantCheck(t, md, name)
	}
	refused := 0
	for _, d := range crDecisions(t, runDir) {
		switch d["credential"] {
		case "refused":
			refused++
			if d["host"] != agModelHost || d["decision"] != "deny" || !strings.Contains(d["reason"].(string), "placeholder") {
				t.Errorf("refused decision %v", d)
			}
		case "injected":
			t.Errorf("doctor's check got a credential injected: %v", d)
		}
	}
	if refused != 2 {
		t.Errorf("%d refused model requests in the decision log, want 2", refused)
	}
	agCheckNoSecret(t, runDir, s.key)
	agCheckNothingLeft(t, r.id)
}

// sendFromInside runs the fixture's send command (args) in a hostile
// stand-in for the workload, hardened like it, on the run's internal
// network, and returns what it printed.
func (r *crRun) sendFromInside(t *testing.T, s agSetup, args ...string) string {
	t.Helper()
	internal := ""
	for _, n := range strings.Fields(docker(t, "network", "ls", "--format", "{{.Name}}", "--filter", "label=mcpsidecar.e2e="+r.id)) {
		if strings.HasSuffix(n, "-internal") {
			internal = n
		}
	}
	if internal == "" {
		t.Fatalf("run %s has no internal network", r.id)
	}
	name := "mcpsidecar-e2e-" + r.id + "-hostile-" + RandHex(3)
	t.Cleanup(func() { dockerErr("rm", "-f", name) })
	base := []string{"run", "--rm", "--name", name, "--label", "mcpsidecar.test=1", "--network", internal,
		"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", "65532:65532", s.image, "send"}
	return docker(t, append(base, args...)...)
}
