//go:build docker

package e2e

// The registry push of --kube-image-registry (issue 20 item 4) against
// the real Docker engine and a real registry (distribution v3, built from
// the Go module proxy, on loopback): the digest the engine's push stream
// reports is the one the registry serves for the tag. Pulling from that
// registry by a cluster's containerd is not covered here.

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
)

// loopbackHTTP talks to the test's registry directly, whatever proxy the
// environment names.
var loopbackHTTP = &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}

// registryVersion is the distribution release the test builds.
const registryVersion = "v3.1.2"

// registryBinary builds the registry once per machine into
// $TMPDIR/mcpsidecar-registry-<version>/registry (kept: building it takes
// minutes) with `go install` from the module proxy.
func registryBinary(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "mcpsidecar-registry-"+registryVersion)
	bin := filepath.Join(dir, "registry")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "install", "github.com/distribution/distribution/v3/cmd/registry@"+registryVersion)
	cmd.Dir = dir // outside our module: the registry's own go.mod decides its dependencies
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the registry: %v\n%s", err, out)
	}
	return bin
}

// startRegistry runs the registry on a free loopback port with its
// storage in a temporary directory and returns its address once it
// answers /v2/. A non-empty htpasswd file content makes it ask for
// basic authentication.
func startRegistry(t *testing.T, htpasswd string) string {
	t.Helper()
	bin := registryBinary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yml")
	conf := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n",
		filepath.Join(dir, "data"), addr)
	if htpasswd != "" {
		pw := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(pw, []byte(htpasswd), 0o600); err != nil {
			t.Fatal(err)
		}
		conf += fmt.Sprintf("auth:\n  htpasswd:\n    realm: mcpsidecar-test\n    path: %s\n", pw)
	}
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfg)
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=none", "OTEL_LOGS_EXPORTER=none", "OTEL_SDK_DISABLED=true")
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("registry log:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := loopbackHTTP.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || (htpasswd != "" && resp.StatusCode == http.StatusUnauthorized) {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the registry at %s did not answer /v2/ within 20s: %v\n%s", addr, err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestKubeRegistryPush: a tiny FROM-scratch image tagged into a loopback
// registry's repository and pushed through dockerx; the digest from the
// push stream equals the registry's Docker-Content-Digest for the tag,
// and a push of a tag the engine does not hold is a clear error.
func TestKubeRegistryPush(t *testing.T) {
	NeedDocker(t)
	addr := startRegistry(t, "")
	id := RandHex(4)
	src := scratchImage(t, "mcpsidecar-regtest:"+id, "FROM scratch\nCOPY hello.txt /hello.txt\n",
		nil, map[string]string{"hello.txt": "hello " + id + "\n"}, TestLabel)
	repo, err := dockerx.ParseRepository(addr + "/team/mcpsidecar")
	if err != nil {
		t.Fatal(err)
	}
	target := repo + ":" + id
	t.Cleanup(func() { _, _ = dockerErr("rmi", "-f", target) })
	eng, err := dockerx.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := eng.TagImage(ctx, src, target); err != nil {
		t.Fatal(err)
	}
	digest, err := eng.PushImage(ctx, target, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(digest, "sha256:") || len(digest) != len("sha256:")+64 {
		t.Fatalf("pushed digest %q, want sha256:<64 hex>", digest)
	}
	t.Logf("pushed %s; the pods would run %s@%s", target, repo, digest)
	if got := manifestDigest(t, addr, "", "team/mcpsidecar", id); got != digest {
		t.Errorf("the registry serves %s for tag %s, the push reported %s", got, id, digest)
	}
	if got := manifestDigest(t, addr, "", "team/mcpsidecar", digest); got != digest {
		t.Errorf("the registry serves %s for %s", got, digest)
	}

	_, err = eng.PushImage(ctx, repo+":missing-"+id, "")
	t.Logf("pushing a missing tag: %v", err)
	if err == nil || !strings.Contains(err.Error(), "pushing image "+repo+":missing-"+id) {
		t.Errorf("pushing a tag the engine does not hold: %v, want an error naming it", err)
	}
}

// manifestDigest is the registry's Docker-Content-Digest for ref (a tag
// or digest) of name, asking for the manifest types an engine pushes;
// userPass ("user:pass"), when set, is sent as basic authentication.
func manifestDigest(t *testing.T, addr, userPass, name, ref string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodHead, "http://"+addr+"/v2/"+name+"/manifests/"+ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if u, p, ok := strings.Cut(userPass, ":"); ok {
		req.SetBasicAuth(u, p)
	}
	for _, a := range []string{
		"application/vnd.docker.distribution.manifest.v2+json",
		"application/vnd.docker.distribution.manifest.list.v2+json",
		"application/vnd.oci.image.manifest.v1+json",
		"application/vnd.oci.image.index.v1+json",
	} {
		req.Header.Add("Accept", a)
	}
	resp, err := loopbackHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD %s: %s", req.URL, resp.Status)
	}
	return resp.Header.Get("Docker-Content-Digest")
}

// testHtpasswd is the bcrypt entry of user "e2e" with password
// "e2e-push-pass" (cost 4), for the registry that asks for credentials.
const testHtpasswd = "e2e:$2a$04$ty9lXFDlXmZhpZ7uxptNi.gQ29ccCJfQnaChVeTORWJvZP1r3ft1q\n"

// TestKubeRegistryPushAuth: against a registry that asks for basic
// authentication, a push without a credential fails with the registry's
// refusal (an error in the engine's push stream); with the credential
// read from a Docker config file's auths (dockerx.RegistryAuth), it
// succeeds and the digest is the registry's.
func TestKubeRegistryPushAuth(t *testing.T) {
	NeedDocker(t)
	addr := startRegistry(t, testHtpasswd)
	id := RandHex(4)
	src := scratchImage(t, "mcpsidecar-regtest:"+id, "FROM scratch\nCOPY hello.txt /hello.txt\n",
		nil, map[string]string{"hello.txt": "hello auth " + id + "\n"}, TestLabel)
	repo := addr + "/team/mcpsidecar"
	target := repo + ":" + id
	t.Cleanup(func() { _, _ = dockerErr("rmi", "-f", target) })
	eng, err := dockerx.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := eng.TagImage(ctx, src, target); err != nil {
		t.Fatal(err)
	}
	_, err = eng.PushImage(ctx, target, "")
	t.Logf("push without a credential: %v", err)
	if err == nil || !strings.Contains(err.Error(), "pushing image "+target+": ") {
		t.Fatalf("push without a credential: %v, want the registry's refusal", err)
	}

	cfg := filepath.Join(t.TempDir(), "config.json")
	entry := base64.StdEncoding.EncodeToString([]byte("e2e:e2e-push-pass"))
	if err := os.WriteFile(cfg, []byte(`{"auths":{"`+addr+`":{"auth":"`+entry+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	auth, err := dockerx.RegistryAuth(cfg, repo)
	if err != nil || auth == "" {
		t.Fatalf("RegistryAuth() = %q, %v; want the config's credential", auth, err)
	}
	digest, err := eng.PushImage(ctx, target, auth)
	if err != nil {
		t.Fatal(err)
	}
	if got := manifestDigest(t, addr, "e2e:e2e-push-pass", "team/mcpsidecar", id); got != digest {
		t.Errorf("the registry serves %s for tag %s, the push reported %s", got, id, digest)
	}
}
