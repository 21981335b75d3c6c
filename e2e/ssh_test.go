//go:build docker

package e2e

// DOCKER_HOST=ssh://: the engine reached as the docker command reaches
// it, over a real OpenSSH server on this host's loopback running the
// real `docker system dial-stdio`. Such an engine is not local to the
// harness (its API is not a unix socket here): the run goes through the
// engine's API alone (docs/engine-only.md).

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sshServer starts sshd on loopback, accepting one generated key for
// root, and returns the environment that makes ssh use that key: OpenSSH
// reads the user's configuration from the passwd entry's home, not
// $HOME, so PATH leads to an `ssh` that runs the real one with -F and a
// configuration of the test's (nothing of this machine's ssh setup is
// changed).
func sshServer(t *testing.T) (port int, env []string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the ssh engine test runs sshd for root: run it as root")
	}
	sshd, err := exec.LookPath("/usr/sbin/sshd")
	if err != nil {
		t.Fatalf("sshd not installed (scripts/setup.sh installs openssh-server): %v", err)
	}
	dir := t.TempDir()
	for _, k := range []string{"host", "client"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, k)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(dir, "client.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := fmt.Sprintf(`ListenAddress 127.0.0.1:%d
HostKey %s/host
AuthorizedKeysFile %s/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
PidFile %s/sshd.pid
SetEnv PATH=/usr/local/bin:/usr/bin:/bin
`, port, dir, dir, dir)
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sshd, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	var logb syncBuffer
	cmd.Stdout, cmd.Stderr = &logb, &logb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("sshd log:\n%s", logb.String())
		}
	})
	realSSH, err := exec.LookPath("ssh")
	if err != nil {
		t.Fatalf("the ssh client is not installed: %v", err)
	}
	sshCfg := fmt.Sprintf("Host 127.0.0.1\n  IdentityFile %s/client\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n", dir)
	if err := os.WriteFile(filepath.Join(dir, "ssh_config"), []byte(sshCfg), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nexec %s -F %s/ssh_config \"$@\"\n", realSSH, dir)
	if err := os.WriteFile(filepath.Join(bin, "ssh"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd did not listen: %v\n%s", err, logb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return port, []string{"PATH=" + bin + ":" + os.Getenv("PATH")}
}

func TestSSHEngineDoctor(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	port, env := sshServer(t)
	env = append(env, fmt.Sprintf("DOCKER_HOST=ssh://root@127.0.0.1:%d", port))
	c, code := RunCLI(t, id, env, "doctor", "--allow-old-engine", "--runs-dir", runsDir)
	if code != 0 {
		t.Fatalf("doctor over ssh exited %d\nstdout:\n%s\nstderr:\n%s", code, c.Stdout.String(), c.Stderr.String())
	}
	RequireNothingLeft(t, label)
	runDir := hxOnlyRun(t, runsDir)
	m := hxReadMeta(t, runDir)
	if !m.Verdict.OK || len(m.ArtifactProblems) > 0 {
		t.Errorf("verdict %v, artifact problems %v", m.Verdict.OK, m.ArtifactProblems)
	}
	b, err := os.ReadFile(filepath.Join(runDir, "run-metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		Engine struct {
			Local    bool   `json:"local"`
			Locality string `json:"locality"`
		} `json:"engine"`
	}
	if err := json.Unmarshal(b, &md); err != nil {
		t.Fatal(err)
	}
	if md.Engine.Local || !strings.Contains(md.Engine.Locality, "not a unix socket") {
		t.Errorf("run-metadata.json engine %+v, want not local, with the reason", md.Engine)
	}
	eoCheckObserved(t, runDir)
	eoCheckDegradations(t, m)
}
