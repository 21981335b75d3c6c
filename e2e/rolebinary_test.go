//go:build docker

package e2e

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDoctorWithRoleBinary: the product binary with the slim role binary
// beside it (make build: bin/mcpsidecar and bin/mcpsidecar-role, copied
// together to a directory of their own) runs doctor with every record
// check of TestHarnessDoctor's that reads the record, and the image is
// made of the role binary, not of the host binary: run-metadata.json says
// so, and the image is smaller than the host binary alone.
func TestDoctorWithRoleBinary(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	built := filepath.Dir(Binary(t))
	dir := t.TempDir()
	host, role := filepath.Join(dir, "mcpsidecar"), filepath.Join(dir, "mcpsidecar-role")
	for _, f := range []struct{ from, to string }{{filepath.Join(built, "mcpsidecar"), host}, {filepath.Join(built, "mcpsidecar-role"), role}} {
		if err := copyFile(f.from, f.to); err != nil {
			t.Fatalf("%v (build both first: make build)", err)
		}
	}
	cmd := exec.Command(host, "doctor", "--allow-old-engine", "--runs-dir", runsDir)
	cmd.Env = append(os.Environ(), "MCPSIDECAR_LABELS="+TestLabel+",mcpsidecar.e2e="+id)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("doctor: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	RequireNothingLeft(t, label)
	runDir := hxOnlyRun(t, runsDir)
	for _, name := range hxDoctorArtifacts {
		t.Run(name, func(t *testing.T) { hxWellFormed(t, filepath.Join(runDir, name)) })
	}
	m := hxReadMeta(t, runDir)
	if m.Command != "doctor" || m.ExitCode != 0 || !m.Verdict.OK || len(m.Containers) != 3 {
		t.Errorf("metadata: command %q exit %d verdict %v, %d containers", m.Command, m.ExitCode, m.Verdict.OK, len(m.Containers))
	}
	hxCheckHardening(t, m, stderr.String())
	hxNoRealLookups(t, runDir, m)

	var img struct {
		Image struct {
			Tag    string `json:"tag"`
			Binary struct {
				Kind      string `json:"kind"`
				SizeBytes int64  `json:"size_bytes"`
			} `json:"binary"`
		} `json:"image"`
	}
	b, err := os.ReadFile(filepath.Join(runDir, "run-metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &img); err != nil {
		t.Fatal(err)
	}
	roleInfo, err := os.Stat(role)
	if err != nil {
		t.Fatal(err)
	}
	hostInfo, err := os.Stat(host)
	if err != nil {
		t.Fatal(err)
	}
	if img.Image.Binary.Kind != "role" || img.Image.Binary.SizeBytes != roleInfo.Size() {
		t.Errorf("image.binary = %+v, want kind role and the role binary's %d bytes", img.Image.Binary, roleInfo.Size())
	}
	out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Size}}", img.Image.Tag).Output()
	if err != nil {
		t.Fatalf("docker image inspect %s: %v", img.Image.Tag, err)
	}
	size, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil || size < roleInfo.Size() || size >= hostInfo.Size() {
		t.Errorf("image %s is %d bytes (%v): want at least the role binary's %d and under the host binary's %d", img.Image.Tag, size, err, roleInfo.Size(), hostInfo.Size())
	}
	t.Logf("image %s: %d bytes; role binary %d, host binary %d", img.Image.Tag, size, roleInfo.Size(), hostInfo.Size())
}

// copyFile copies the executable at from to to.
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
