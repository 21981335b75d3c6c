//go:build docker

package e2e

// The Docker side of the offline agent runs (agent_test.go): the docker
// CLI, the stamped binary, the test CA, the fixture image and containers,
// and the event watcher that wires the fixtures into each run.

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func agWrite(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// agBinary builds a binary of its own, stamped with the test's id, rather
// than $MCPSIDECAR_BIN: the image tag hashes the binary but not the CA
// bundle, so the run's image, which trusts only this test's CA, must not
// share a tag with any other run's image. The image is removed afterwards.
func agBinary(t *testing.T, id, dir string) string {
	t.Helper()
	return goBuild(t, "./cmd/mcpsidecar", filepath.Join(dir, "mcpsidecar"),
		"-X", "github.com/mcpsidecar/mcpsidecar/internal/version.Version=e2e-agent-"+id)
}

// agRemoveLeftovers frees what a failed run may leave: the fixtures leave
// the run's networks (the harness cannot remove a network they are on),
// then the run's containers and networks go. A passing run leaves nothing,
// which the test checks before this runs.
func agRemoveLeftovers(id string, fx agFixtures) {
	filter := "label=mcpsidecar.e2e=" + id
	if ids, err := dockerErr("ps", "-aq", "--filter", filter); err == nil && ids != "" {
		dockerErr(append([]string{"rm", "-f"}, strings.Fields(ids)...)...)
	}
	nets, _ := dockerErr("network", "ls", "-q", "--filter", filter)
	for _, n := range strings.Fields(nets) {
		for _, c := range fx.all() {
			dockerErr("network", "disconnect", "--force", n, c.name)
		}
		dockerErr("network", "rm", n)
	}
}

// agRemoveRunImages removes the images the runs under dir built (named in
// their metadata).
func agRemoveRunImages(dir string) {
	entries, _ := filepath.Glob(filepath.Join(dir, "runs-*", "*"))
	for _, runDir := range entries {
		var md struct {
			Image struct {
				Tag string `json:"tag"`
			} `json:"image"`
		}
		b, err := os.ReadFile(filepath.Join(runDir, "run-metadata.json"))
		if err == nil && json.Unmarshal(b, &md) == nil && md.Image.Tag != "" {
			dockerErr("rmi", "-f", md.Image.Tag)
		}
	}
}

// agCerts writes a test CA (ca.pem, returned) and a certificate for the
// fake Learn host signed by it (certs/learn.pem, certs/learn-key.pem).
func agCerts(t *testing.T, dir string) string {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mcpsidecar e2e test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: agLearnHost}, DNSNames: []string{agLearnHost, mcpHostA, agModelHost},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(leafKey)
	os.MkdirAll(filepath.Join(dir, "certs"), 0o755)
	ca := filepath.Join(dir, "ca.pem")
	agWrite(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	agWrite(t, filepath.Join(dir, "certs", "learn.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER})))
	agWrite(t, filepath.Join(dir, "certs", "learn-key.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	return ca
}

// agFixtureImage builds the FROM-scratch fixture image (binary + certs).
func agFixtureImage(t *testing.T, id, dir string) string {
	t.Helper()
	image := "mcpsidecar-e2e-fixture:" + id
	t.Cleanup(func() { dockerErr("rmi", "-f", image) })
	goBuild(t, "./e2e/fixtures/cmd/fixture", filepath.Join(dir, "fixture"))
	agWrite(t, filepath.Join(dir, "Dockerfile"), "FROM scratch\nCOPY fixture /fixture\nCOPY certs /certs\nENTRYPOINT [\"/fixture\"]\n")
	agWrite(t, filepath.Join(dir, ".dockerignore"), "*\n!fixture\n!certs\n")
	docker(t, "build", "-q", "--label", "mcpsidecar.test=1", "-t", image, dir)
	return image
}

// agFixtures are the two fixture containers and their own network, and
// any extra fixture a test started (joined under its alias too).
type agFixtures struct {
	network, model, learn string
	extra                 []agAlias
}

// agAlias is a fixture container and the name it answers to.
type agAlias struct{ name, alias string }

// all is every fixture with its alias.
func (fx agFixtures) all() []agAlias {
	return append([]agAlias{{fx.model, agModelHost}, {fx.learn, agLearnHost}}, fx.extra...)
}

// agStartFixtures starts both fixtures, hardened, on an internal network
// of their own (no route out) until they join the run's egress network.
func agStartFixtures(t *testing.T, id, image, key, behaviour string) agFixtures {
	t.Helper()
	return agStartFixturesWith(t, id, image, key, behaviour, false)
}

// agStartFixturesWith is agStartFixtures with the model served over TLS
// on 443 (the test CA's certificate) when modelTLS is set, as the real
// model API is: the gateway then injects the key into a TLS connection
// of its own, on a pooled, kept-alive upstream connection.
func agStartFixturesWith(t *testing.T, id, image, key, behaviour string, modelTLS bool, modelArgs ...string) agFixtures {
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
		{fx.model, append(agModelArgs(key, behaviour, modelTLS), modelArgs...)},
		{fx.learn, []string{"learn", "--listen", ":443", "--path", "/api/mcp", "--tls-cert", "/certs/learn.pem", "--tls-key", "/certs/learn-key.pem"}},
	} {
		name := c.name
		t.Cleanup(func() { dockerErr("rm", "-f", name) })
		args := append(append(append([]string{}, common...), "--name", name, image), c.args...)
		docker(t, args...)
	}
	return fx
}

func agModelArgs(key, behaviour string, modelTLS bool) []string {
	if modelTLS {
		return []string{"model", "--listen", ":443", "--key", key, "--behaviour", behaviour, "--tls-cert", "/certs/learn.pem", "--tls-key", "/certs/learn-key.pem"}
	}
	return []string{"model", "--listen", ":80", "--key", key, "--behaviour", behaviour}
}

// agWatcher follows the engine's events for this test's run: it connects the
// fixtures to the run's egress network the moment it exists, holds the
// gateway paused if it starts before they are connected, and disconnects
// them when the agent ends, so the harness can remove the network.
type agWatcher struct {
	id string
	fx agFixtures
	// leaveOn is the role whose end disconnects the fixtures ("agent").
	leaveOn string
	cmd     *exec.Cmd
	done    chan struct{}
	ready   chan struct{}
	mu      sync.Mutex
	egress  string
	joined  time.Time // when both fixtures were connected
	// held: by role (gateway, sidecar), the service was kept from becoming
	// ready until the fixtures were connected (joined before it ran, or
	// paused until then).
	held map[string]bool
	// late: the roles paused only after they said they listened.
	late   []string
	starts map[string]time.Time
	// runsDir holds the run's directory, once it ran (checkOrder reads
	// the sidecar's log there); empty when the caller did not say.
	runsDir string
	peak    int64 // the agent container's peak memory, from its cgroup
	errs    []error
	wg      sync.WaitGroup
	once    sync.Once
}

type agEvent struct {
	Type, Action string
	Actor        struct {
		ID         string
		Attributes map[string]string
	}
	TimeNano int64 `json:"timeNano"`
}

func agWatch(t *testing.T, id string, fx agFixtures) *agWatcher {
	t.Helper()
	return agWatchLeaving(t, id, fx, "agent")
}

// agWatchLeaving is agWatch with the fixtures disconnected when the
// container of role leaveOn ends instead of the agent's.
func agWatchLeaving(t *testing.T, id string, fx agFixtures, leaveOn string) *agWatcher {
	t.Helper()
	w := &agWatcher{id: id, fx: fx, leaveOn: leaveOn, done: make(chan struct{}), ready: make(chan struct{}), starts: map[string]time.Time{}, held: map[string]bool{}}
	w.cmd = exec.Command("docker", "events", "--format", "{{json .}}", "--filter", "type=network", "--filter", "type=container")
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.stop)
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go w.loop(bufio.NewScanner(out))
	// A network of our own proves the event stream is live before the run.
	syncNet := "mcpsidecar-e2e-" + id + "-sync"
	docker(t, "network", "create", "--label", "mcpsidecar.test=1", syncNet)
	docker(t, "network", "rm", syncNet)
	select {
	case <-w.ready:
	case <-time.After(2 * time.Minute): // the engine is slow to start the stream on a loaded machine (load ~25: over 30 s)
		t.Fatal("docker events did not report the sync network within 2 minutes")
	}
	return w
}

func (w *agWatcher) loop(sc *bufio.Scanner) {
	defer close(w.done)
	joined := make(chan struct{})
	for sc.Scan() {
		var ev agEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		attrs := ev.Actor.Attributes
		switch {
		case ev.Type == "network" && ev.Action == "create" && attrs["name"] == "mcpsidecar-e2e-"+w.id+"-sync":
			close(w.ready)
		case ev.Type == "network" && ev.Action == "create" && strings.HasSuffix(attrs["name"], "-egress") && w.ours(attrs["name"]):
			w.wg.Add(1)
			go func() { defer w.wg.Done(); w.join(attrs["name"]); close(joined) }()
		case ev.Type == "container" && attrs["mcpsidecar.e2e"] == w.id && ev.Action == "create" &&
			(attrs["mcpsidecar.role"] == "gateway" || attrs["mcpsidecar.role"] == "sidecar"):
			// From its creation, not its start: the event of its start
			// comes too late to pause it before it can be ready.
			role := attrs["mcpsidecar.role"]
			w.wg.Add(1)
			go func() { defer w.wg.Done(); w.holdUntil(role, ev.Actor.ID, joined) }()
		case ev.Type == "container" && attrs["mcpsidecar.e2e"] == w.id && ev.Action == "start":
			w.mu.Lock()
			w.starts[attrs["mcpsidecar.role"]] = time.Unix(0, ev.TimeNano)
			w.mu.Unlock()
			if attrs["mcpsidecar.role"] == "agent" {
				w.wg.Add(1)
				go func() { defer w.wg.Done(); w.samplePeak(ev.Actor.ID) }()
			}
		case ev.Type == "container" && attrs["mcpsidecar.e2e"] == w.id && ev.Action == "die" && attrs["mcpsidecar.role"] == w.leaveOn:
			w.wg.Add(1)
			go func() { defer w.wg.Done(); w.leave() }()
		}
	}
}

// ours reads the network's labels (network events carry none).
func (w *agWatcher) ours(network string) bool {
	out, err := dockerErr("network", "inspect", "--format", `{{index .Labels "mcpsidecar.e2e"}}`, network)
	return err == nil && out == w.id
}

// join connects every fixture to network, all at once (the gateway waits,
// paused, for the slowest).
func (w *agWatcher) join(network string) {
	var wg sync.WaitGroup
	for _, c := range w.fx.all() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := dockerErr("network", "connect", "--alias", c.alias, network, c.name); err != nil {
				w.fail(err)
			}
		}()
	}
	wg.Wait()
	w.mu.Lock()
	w.egress, w.joined = network, time.Now()
	w.mu.Unlock()
}

// holdUntil pauses a service (the gateway, and the sidecar, the first role
// to look a fixture name up), from the moment it runs, until the fixtures
// are connected (when they are not yet): a paused service cannot pass the
// harness's readiness check, so nothing asks the gateway for a fixture name
// too early. The services are created ahead of their start, and the gateway
// listens within milliseconds of it, less than the event of its start and a
// docker CLI call take under load (the sidecar then found no fixture, "no
// such host", and its servers' tools were missing), so the pause is asked
// of the engine's API from the creation on, until the engine takes it (it
// refuses a container not yet running). The sidecar, started ahead of the
// gateway and released only once the gateway is ready, is paused long
// before it could run, even when the gateway's pause comes late.
func (w *agWatcher) holdUntil(role, container string, joined chan struct{}) {
	paused, err := w.pauseOnceRunning(container, joined)
	switch {
	case errors.Is(err, errGone): // removed before it ran: nothing to hold
		return
	case err != nil:
		w.fail(fmt.Errorf("pausing the %s: %w", role, err))
		return
	case !paused: // the fixtures joined first
		w.setHeld(role)
		return
	}
	// The pause should come before the service could answer; one that
	// already said it listens may have been found ready (explained in the
	// test's log, should the run then miss a fixture).
	if out, _ := dockerErr("logs", container); strings.Contains(out, role+" listening") {
		w.mu.Lock()
		w.late = append(w.late, role)
		w.mu.Unlock()
	}
	select {
	case <-joined:
		w.setHeld(role)
	case <-time.After(time.Minute):
		w.fail(errors.New("the fixtures did not join the egress network within a minute"))
	}
	if _, err := dockerErr("unpause", container); err != nil {
		w.fail(err)
	}
}

// errGone: the container was removed before it could be paused.
var errGone = errors.New("container removed")

// pauseOnceRunning asks the engine to pause container until it does
// (true) or the fixtures have joined (false). The engine refuses (409) a
// container not yet running: it is asked again at once, through its API
// socket, a few milliseconds per refusal, so the pause lands within
// milliseconds of the start.
func (w *agWatcher) pauseOnceRunning(container string, joined chan struct{}) (bool, error) {
	api := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", "/var/run/docker.sock")
	}}, Timeout: 10 * time.Second}
	defer api.CloseIdleConnections()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case <-joined:
			return false, nil
		default:
		}
		resp, err := api.Post("http://docker/containers/"+container+"/pause", "", nil)
		if err != nil {
			return false, err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusNoContent:
			return true, nil
		case resp.StatusCode == http.StatusNotFound:
			return false, errGone
		case resp.StatusCode != http.StatusConflict: // 409: not running yet
			return false, fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
		}
		select {
		case <-joined:
			return false, nil
		case <-deadline:
			return false, errors.New("not running 2 minutes after its creation")
		case <-tick.C:
		}
	}
}

func (w *agWatcher) setHeld(role string) {
	w.mu.Lock()
	w.held[role] = true
	w.mu.Unlock()
}

// samplePeak follows the agent container's memory high-water mark in its
// cgroup (v1: memory.max_usage_in_bytes; v2: memory.peak) until the
// cgroup goes away. The agent lives well under a second, too short for
// the engine's stats stream to be sampled reliably.
func (w *agWatcher) samplePeak(id string) {
	paths := []string{
		"/sys/fs/cgroup/memory/docker/" + id + "/memory.max_usage_in_bytes",
		"/sys/fs/cgroup/system.slice/docker-" + id + ".scope/memory.peak",
	}
	for misses := 0; misses < 50; {
		found := false
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			var v int64
			if _, err := fmt.Sscan(string(b), &v); err == nil {
				found = true
				w.mu.Lock()
				w.peak = max(w.peak, v)
				w.mu.Unlock()
			}
		}
		if !found {
			misses++
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (w *agWatcher) leave() {
	w.mu.Lock()
	network := w.egress
	w.mu.Unlock()
	for _, c := range w.fx.all() {
		if _, err := dockerErr("network", "disconnect", "--force", network, c.name); err != nil {
			w.fail(err)
		}
	}
}

func (w *agWatcher) fail(err error) {
	w.mu.Lock()
	w.errs = append(w.errs, err)
	w.mu.Unlock()
}

func (w *agWatcher) stop() {
	w.once.Do(func() {
		w.wg.Wait()
		if w.cmd.Process != nil {
			w.cmd.Process.Kill()
			w.cmd.Wait()
		}
	})
}

// checkOrder: the fixtures joined before the sidecar (the first container
// to look up a fixture name, through the gateway) could run. That is before
// its container started, or, when the harness starts a held sidecar beside
// the gateway (engines before 26: the sidecar does nothing until it is
// released, once the gateway is ready), before the gateway could become
// ready: the watcher saw the join before the sidecar or the gateway ran,
// or paused it until the join.
func (w *agWatcher) checkOrder(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := errors.Join(w.errs...); err != nil {
		t.Errorf("fixture wiring: %v", err)
	}
	if len(w.late) > 0 {
		t.Logf("fixture wiring: paused only after they said they listened: %v", w.late)
	}
	side, ok := w.starts["sidecar"]
	switch {
	case w.joined.IsZero():
		t.Error("the fixtures never joined the run's egress network")
	case !ok:
		t.Error("no start event for the sidecar")
	case !w.joined.Before(side) && !w.held["sidecar"] && !w.held["gateway"]:
		// The harness holds every role at start until it has read it
		// (internal/hold), and releases the sidecar once the gateway is
		// ready: it said it listened only then. Where this watcher could
		// not pause (another engine's containers: rootless), that line's
		// time is the sidecar's first moment of work.
		if l := sidecarListening(w.runsDir); !l.IsZero() && w.joined.Before(l) {
			t.Logf("fixtures joined at %s, after the sidecar's container started at %s, before it was released (it said it listened at %s)", w.joined, side, l)
			return
		}
		t.Errorf("fixtures joined at %s, after the sidecar started at %s, and neither the sidecar nor the gateway was held until then", w.joined, side)
	}
}

// sidecarListening is when the run's sidecar said it listened (its
// "sidecar listening" log line in mcp-sidecar-stderr.txt), zero when not
// found.
func sidecarListening(runsDir string) time.Time {
	if runsDir == "" {
		return time.Time{}
	}
	files, _ := filepath.Glob(filepath.Join(runsDir, "run-*", "mcp-sidecar-stderr.txt"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			var l struct {
				Time time.Time `json:"time"`
				Msg  string    `json:"msg"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "sidecar listening" {
				return l.Time
			}
		}
	}
	return time.Time{}
}
