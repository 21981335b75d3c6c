// Package enginehost gives a test a Docker engine that is "elsewhere": a
// dockerd running inside a container of the local engine, reached only
// over TCP on a network of its own, so that its process ids, mounts and
// paths are not this host's, as with Docker Desktop's VM, Colima or a
// remote DOCKER_HOST. Only test code imports it (the e2e tests, build tag
// docker); it needs root and the local Docker engine.
//
// Use:
//
//	eng := enginehost.Start(t, enginehost.Options{TLS: true, Shared: []string{dir}})
//	cmd.Env = append(os.Environ(), eng.Env...) // DOCKER_HOST=tcp://<ip>:2376, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH
//	out := eng.Docker(t, "ps", "-a")            // the docker CLI against that engine
//	eng.Exec(t, "cat", "/proc/sys/kernel/ns_last_pid") // a command inside the engine's container
//
// [Start] builds (or finds, in seconds) the engine's image with
// scripts/build-engine-image.sh (Debian trixie's docker.io 26 by default;
// [Options].Suite "bookworm" gives docker.io 20.10, an engine older than
// 26), creates a network (--internal: nothing the engine or its containers
// send leaves this machine; this host reaches the engine on its bridge), starts the engine's container on it and waits
// until the engine answers /_ping. Everything is removed by t.Cleanup,
// registered before it is created: the engine's containers (stopped through
// the engine first, so that their cgroups go with them), the engine's
// container, the network, the engine's data root and the certificates; the
// cleanup fails the test when any of them, or a cgroup of the engine's
// container, is still there after.
//
// The engine's container: every capability but CAP_SYS_RESOURCE
// (--privileged is refused by runc on this machine, whose capability set
// lacks it), seccomp, AppArmor and the masked /proc paths unconfined (the
// test may write the engine's /proc/sys/kernel/ns_last_pid), all devices,
// the host's cgroup namespace (with [Options].NoLandlock, seccomp is a
// profile that takes Landlock away from the engine and everything it
// runs), and its data root (/var/lib/docker) bound to
// a host directory ([Engine].DataRoot): overlay2 works on the host's file
// system, not over the container's own overlay root. Its dockerd listens on
// tcp://0.0.0.0:2375 without TLS, or with [Options].TLS on 2376 with
// certificates made for its address (a CA, a server certificate, a client
// certificate; the daemon verifies the client's), and on its own unix
// socket inside the container. Nothing is pulled: an image the engine needs
// is built through its API (mcpsidecar builds its runtime image FROM scratch
// with its binary) or loaded into it ([Engine].Docker "load").
//
// Paths: a bind mount the engine makes names a path on the engine's host,
// the container. [Options].Shared binds host directories into it at the
// same path, as Docker Desktop shares the user's home: a role's output
// written there is seen here. Issue 29 moves mcpsidecar's output into
// engine volumes; a test that does not need the sharing should not ask
// for it.
//
// Labels: everything created carries mcpsidecar.test=1 and
// mcpsidecar.enginehost=<id>, plus [Options].Labels.
package enginehost

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options says which engine to start and how.
type Options struct {
	// Suite is the Debian suite the engine comes from: "trixie" (the
	// default, docker.io 26.1) or "bookworm" (docker.io 20.10).
	Suite string
	// TLS serves the API on port 2376 with TLS and client certificates
	// instead of plain TCP on 2375.
	TLS bool
	// Shared are host directories bound into the engine's container at
	// the same path (read-write).
	Shared []string
	// Labels ("k=v") are added to what Start creates.
	Labels []string
	// DaemonArgs are added to dockerd's command line.
	DaemonArgs []string
	// Ready bounds the wait for /_ping (default 90 s).
	Ready time.Duration
	// NoLandlock gives the engine's container a seccomp profile that
	// answers the Landlock system calls with ENOSYS ([NoLandlockProfile]).
	// Seccomp filters are inherited and stack, so every container of that
	// engine runs on "a kernel without Landlock", as in a VM whose kernel
	// was built without it.
	NoLandlock bool
}

// NoLandlockProfile is the engine container's seccomp profile with
// [Options].NoLandlock, in Docker's format: everything allowed but
// landlock_create_ruleset, landlock_add_rule and landlock_restrict_self
// (444, 445 and 446 on amd64 and arm64), which fail with ENOSYS (38), what
// a kernel without Landlock answers.
const NoLandlockProfile = `{
  "defaultAction": "SCMP_ACT_ALLOW",
  "syscalls": [
    {
      "names": ["landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"],
      "action": "SCMP_ACT_ERRNO",
      "errnoRet": 38
    }
  ]
}
`

// Engine is a running engine elsewhere.
type Engine struct {
	// Host is its DOCKER_HOST: tcp://<ip>:2375, or :2376 with TLS.
	Host string
	// Env is what a client needs to reach it: DOCKER_HOST, and with TLS
	// DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH (ca.pem, cert.pem,
	// key.pem). DOCKER_CONTEXT is emptied so that a CLI context does not
	// win over DOCKER_HOST.
	Env []string
	// IP is the engine's address on Network.
	IP string
	// Network is the name of the network Start created for it.
	Network string
	// Container is the name of the engine's container on the local engine.
	Container string
	// ID is that container's id.
	ID string
	// DataRoot is the host directory that is the engine's /var/lib/docker.
	DataRoot string
	// CertDir is DOCKER_CERT_PATH with TLS, else empty.
	CertDir string
	// Version is the engine's version (its /version).
	Version string
	// Image is the engine's image on the local engine.
	Image string
	// Label is mcpsidecar.enginehost=<id>, on everything Start created.
	Label string
	// SeccompProfile is the engine container's seccomp profile file with
	// [Options].NoLandlock, else empty (unconfined).
	SeccompProfile string

	api     *http.Client
	apiBase string
}

// API is an HTTP client for the engine's API and its base URL
// (http://<ip>:2375, or https://<ip>:2376 with the client certificate),
// for a test that must follow the engine faster than the docker CLI
// starts (GET /events, then /containers/<id>/json).
func (e *Engine) API() (*http.Client, string) { return e.api, e.apiBase }

const (
	testLabel = "mcpsidecar.test=1"
	plainPort = 2375
	tlsPort   = 2376
	// serverCertDir is where the engine's container sees its TLS files.
	serverCertDir = "/etc/mcpsidecar-engine-tls"
)

// Start starts an engine elsewhere for the test; t.Cleanup removes it.
// It fails the test (never skips) when something it needs is missing.
func Start(t testing.TB, o Options) *Engine {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("enginehost: an engine inside a container needs root (capabilities, mounts, its data root)")
	}
	if o.Suite == "" {
		o.Suite = "trixie"
	}
	if o.Ready == 0 {
		o.Ready = 90 * time.Second
	}
	id := randHex(6)
	e := &Engine{
		Network:   "mcpsidecar-enginehost-" + id,
		Container: "mcpsidecar-enginehost-" + id,
		Label:     "mcpsidecar.enginehost=" + id,
		Image:     Image(t, o.Suite),
	}
	var err error
	if e.DataRoot, err = os.MkdirTemp("", "mcpsidecar-engine-data-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.teardown(t) })
	labels := append([]string{testLabel, e.Label}, o.Labels...)
	// Internal: nothing the engine or its containers send leaves this
	// machine; this host still reaches the engine on the bridge.
	host(t, append([]string{"network", "create", "--internal"}, append(labelArgs(labels), e.Network)...)...)
	if o.TLS {
		if e.CertDir, err = os.MkdirTemp("", "mcpsidecar-engine-tls-"); err != nil {
			t.Fatal(err)
		}
	}
	if o.NoLandlock {
		if e.SeccompProfile, err = writeTemp("mcpsidecar-engine-seccomp-*.json", NoLandlockProfile); err != nil {
			t.Fatal(err)
		}
	}
	e.ID = host(t, e.runArgs(o, labels)...)
	if o.NoLandlock {
		e.checkFiltered(t)
	}
	e.IP = host(t, "inspect", "-f", "{{(index .NetworkSettings.Networks \""+e.Network+"\").IPAddress}}", e.Container)
	if e.IP == "" {
		t.Fatalf("enginehost: container %s has no address on %s", e.Container, e.Network)
	}
	port := plainPort
	e.Env = []string{"DOCKER_CONTEXT="}
	if o.TLS {
		port = tlsPort
		if err := writeCerts(e.CertDir, e.IP); err != nil {
			t.Fatalf("enginehost: %v", err)
		}
		e.Env = append(e.Env, "DOCKER_TLS_VERIFY=1", "DOCKER_CERT_PATH="+filepath.Join(e.CertDir, "client"))
	}
	e.Host = fmt.Sprintf("tcp://%s:%d", e.IP, port)
	e.Env = append(e.Env, "DOCKER_HOST="+e.Host)
	if err := e.waitReady(o.Ready); err != nil {
		t.Fatalf("enginehost: %v\nthe engine's log:\n%s", err, e.logs())
	}
	t.Logf("enginehost: Docker Engine %s (Debian %s) at %s, data root %s", e.Version, o.Suite, e.Host, e.DataRoot)
	return e
}

// runArgs is `docker run` of the engine's container.
func (e *Engine) runArgs(o Options, labels []string) []string {
	args := []string{"run", "-d", "--name", e.Container, "--hostname", "engine-elsewhere", "--network", e.Network}
	args = append(args, labelArgs(labels)...)
	args = append(args,
		"--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
		"--security-opt", "seccomp="+cmp.Or(e.SeccompProfile, "unconfined"), "--security-opt", "apparmor=unconfined",
		"--security-opt", "systempaths=unconfined",
		"--device-cgroup-rule", "a *:* rwm", "--cgroupns", "host",
		"-v", e.DataRoot+":/var/lib/docker")
	for _, dir := range o.Shared {
		args = append(args, "-v", dir+":"+dir)
	}
	daemon := []string{"--host=unix:///var/run/docker.sock"}
	if o.TLS {
		args = append(args, "-v", filepath.Join(e.CertDir, "server")+":"+serverCertDir+":ro",
			"-e", "MCPSIDECAR_ENGINE_WAIT_FOR="+serverCertDir+"/ready")
		daemon = append(daemon, fmt.Sprintf("--host=tcp://0.0.0.0:%d", tlsPort), "--tlsverify",
			"--tlscacert="+serverCertDir+"/ca.pem", "--tlscert="+serverCertDir+"/cert.pem", "--tlskey="+serverCertDir+"/key.pem")
	} else {
		daemon = append(daemon, fmt.Sprintf("--host=tcp://0.0.0.0:%d", plainPort), "--tls=false")
	}
	args = append(args, e.Image)
	return append(append(args, daemon...), o.DaemonArgs...)
}

// Docker runs the docker CLI against the engine and returns its trimmed
// stdout; an error fails the test.
func (e *Engine) Docker(t testing.TB, args ...string) string {
	t.Helper()
	out, err := e.DockerErr(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// DockerErr is [Engine.Docker] returning the error.
func (e *Engine) DockerErr(args ...string) (string, error) {
	return run(e.Env, "docker", args...)
}

// Exec runs a command inside the engine's container (docker exec on the
// local engine) and returns its trimmed stdout; an error fails the test.
func (e *Engine) Exec(t testing.TB, args ...string) string {
	t.Helper()
	return host(t, append([]string{"exec", e.Container}, args...)...)
}

// SetLastPid makes n the last process id the engine's pid namespace gave:
// the next process started there (by the engine, or anything else in its
// container) gets n+1 or the next free one after it.
func (e *Engine) SetLastPid(t testing.TB, n int) {
	t.Helper()
	e.Exec(t, "sh", "-c", fmt.Sprintf("echo %d > /proc/sys/kernel/ns_last_pid", n))
}

// checkFiltered fails the test unless the engine's dockerd runs under a
// seccomp filter: without it the engine's containers would have the
// host's Landlock, and a test of a kernel without it would prove nothing.
func (e *Engine) checkFiltered(t testing.TB) {
	t.Helper()
	status := e.Exec(t, "cat", "/proc/1/status")
	if !strings.Contains(status, "Seccomp:\t2") {
		t.Fatalf("enginehost: the engine's container runs under no seccomp filter (profile %s):\n%s", e.SeccompProfile, status)
	}
}

// writeTemp writes data to a new temporary file named by pattern.
func writeTemp(pattern, data string) (string, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return f.Name(), err
}

// logs is the tail of the engine's container's log, for a failure.
func (e *Engine) logs() string {
	out, err := run(nil, "docker", "logs", "--tail", "40", e.Container)
	if err != nil {
		return err.Error()
	}
	return out
}

var (
	imageMu sync.Mutex
	images  = map[string]string{}
)

// Image is the tag of the engine's image for suite, built by
// scripts/build-engine-image.sh when missing (minutes the first time on a
// machine, a second after), once per test process.
func Image(t testing.TB, suite string) string {
	t.Helper()
	imageMu.Lock()
	defer imageMu.Unlock()
	if tag, ok := images[suite]; ok {
		return tag
	}
	script := filepath.Join(repoRoot(), "scripts", "build-engine-image.sh")
	var stderr bytes.Buffer
	cmd := exec.Command(script, "--suite", suite)
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("enginehost: building the engine image (%s --suite %s): %v\n%s", script, suite, err, stderr.String())
	}
	tag := strings.TrimSpace(string(out))
	if d := time.Since(start); d > 10*time.Second {
		t.Logf("enginehost: built %s in %s", tag, d.Round(time.Second))
	}
	images[suite] = tag
	return tag
}

// repoRoot is the module's root, from this file's place in it.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// host runs the docker CLI against the local engine; an error fails the test.
func host(t testing.TB, args ...string) string {
	t.Helper()
	out, err := run(nil, "docker", args...)
	if err != nil {
		t.Fatalf("enginehost: %v", err)
	}
	return out
}

// run runs name with args in this process's environment plus env, and
// returns its trimmed stdout, or an error carrying its stderr.
func run(env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

func labelArgs(labels []string) []string {
	var args []string
	for _, l := range labels {
		args = append(args, "--label", l)
	}
	return args
}

// versionOf decodes the engine's /version.
func versionOf(body []byte) (string, error) {
	var v struct{ Version string }
	if err := json.Unmarshal(body, &v); err != nil {
		return "", fmt.Errorf("decoding /version: %w", err)
	}
	if v.Version == "" {
		return "", fmt.Errorf("decoding /version: no version in %q", body)
	}
	return v.Version, nil
}
