//go:build docker

package e2e

// Issue 31 on Windows, as far as this Linux machine can go: the Windows
// build of mcpsidecar (GOOS=windows), run under Debian's wine 8.0 through
// scripts/wine-exec.sh (the prefix and ProcessPrng shim of make
// wine-unit), runs `doctor` against a Docker engine elsewhere reached over
// TLS (internal/testutil/enginehost, Docker 26; its client certificates
// named by a Windows path, Z:\...), with its runs directory on the
// prefix's C: drive, and `spec check` on spec files named by C:\ paths.
// The record gets the same checks as the Linux runs against an engine
// elsewhere (e2e/elsewhere_engineonly_test.go, e2e/engineonly_test.go),
// and is then read as a Windows user gets it: names Windows can hold, no
// read-only file (the user removes their runs), the paths printed as
// Windows paths, `runs show` by the Windows build.
//
// Wine is not Windows: it reads a path that starts with '/' as a Unix
// path, where Windows takes it on the current drive; it has no ACLs (a
// file's read-only attribute is its missing write bits); and it lacks the
// file-disposition call that Go 1.26's os.RemoveAll and os.Root.Remove use
// (docs/platforms.md). Nothing here leans on the first two; the test
// removes what the Windows build wrote from the Linux side.

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/testutil/enginehost"
)

// wineHost runs the Windows build under wine in a prefix of its own.
type wineHost struct {
	script  string // scripts/wine-exec.sh
	prefix  string // WINEPREFIX
	exe     string // the Windows binary, as a Windows path
	exePath string // the same, as a Linux path
	scratch string // a directory of the test on the prefix's C: drive (a Linux path)
}

// newWine builds the windows/amd64 product binary, makes the prefix
// (wine-exec.sh, once per machine), checks the binary runs there, and
// gives the test a directory on C:. Wine's server is waited for at the
// end: nothing of wine is left running.
func newWine(t testing.TB, id string) *wineHost {
	t.Helper()
	for _, tool := range []string{"wine", "wineserver", "x86_64-w64-mingw32-gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the wine e2e tests need %s: apt-get install wine wine64 gcc-mingw-w64-x86-64-win32 (scripts/setup.sh installs them)", tool)
		}
	}
	w := &wineHost{script: filepath.Join(repoRootTB(t), "scripts", "wine-exec.sh"), prefix: os.Getenv("WINEPREFIX")}
	if w.prefix == "" {
		w.prefix = filepath.Join(os.Getenv("HOME"), ".cache", "mcpsidecar-wine") // wine-exec.sh's default
	}
	exe := buildFor(t, "windows", filepath.Join(t.TempDir(), "mcpsidecar.exe"))
	w.exe, w.exePath = w.winPath(exe), exe
	t.Cleanup(func() { w.waitServer(t) })
	if r := w.run(t, nil, "version"); r.code != 0 || !strings.Contains(r.stdout, "windows/amd64") {
		t.Fatalf("mcpsidecar.exe version under wine: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	w.scratch = filepath.Join(w.prefix, "drive_c", "mcpsidecar-e2e-"+id)
	t.Cleanup(func() { os.RemoveAll(w.scratch) }) // from Linux: wine 8.0 cannot (docs/platforms.md)
	if err := os.Mkdir(w.scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	return w
}

// buildFor builds the product binary (no test commands) for goos/amd64.
func buildFor(t testing.TB, goos, out string) string {
	t.Helper()
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./cmd/mcpsidecar")
	cmd.Dir = repoRootTB(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=%s go build: %v\n%s", goos, err, b)
	}
	return out
}

// repoRootTB is repoRoot for a test or a benchmark.
func repoRootTB(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd() // go test runs in the package's directory, e2e/
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}

// winPath is how the Windows build names a Linux path: C:\... under the
// prefix's drive_c, Z:\... (wine's drive of /) elsewhere.
func (w *wineHost) winPath(p string) string {
	if rel, err := filepath.Rel(filepath.Join(w.prefix, "drive_c"), p); err == nil && !strings.HasPrefix(rel, "..") {
		return `C:\` + strings.ReplaceAll(rel, "/", `\`)
	}
	return "Z:" + strings.ReplaceAll(p, "/", `\`)
}

// wineResult is one run of the Windows build.
type wineResult struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// run runs the Windows build with args, its working directory the test's
// C: directory (once made), in this environment without what would steer
// it (DOCKER_*, MCPSIDECAR_*), plus env.
func (w *wineHost) run(t testing.TB, env []string, args ...string) wineResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.script, append([]string{w.exe}, args...)...)
	cmd.Dir = w.scratch
	cmd.Env = append(append(cleanEnv(), "WINEPREFIX="+w.prefix), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := wineResult{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %s under wine: %v\n%s", args[0], err, r.stderr)
	}
	return r
}

// cleanEnv is this process's environment without DOCKER_*, MCPSIDECAR_*
// and WINEPREFIX, so that only what a test gives reaches the binary.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DOCKER_") && !strings.HasPrefix(kv, "MCPSIDECAR_") && !strings.HasPrefix(kv, "WINEPREFIX=") {
			env = append(env, kv)
		}
	}
	return env
}

// waitServer waits for the prefix's wineserver to end (it does, seconds
// after its last process), rather than killing it: another test's wine
// may share the prefix.
func (w *wineHost) waitServer(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "wineserver", "-w")
	cmd.Env = append(os.Environ(), "WINEPREFIX="+w.prefix)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("waiting for wineserver (%s): %v: %s", w.prefix, err, out)
	}
}

// wineEngineEnv is what the Windows build needs to reach eng: its
// DOCKER_* with DOCKER_CERT_PATH as a Windows path, the test labels, and
// the Linux binary for the image (under wine os.Executable is the .exe).
func wineEngineEnv(w *wineHost, eng *enginehost.Engine, id string) []string {
	env := []string{"MCPSIDECAR_LABELS=" + TestLabel + ",mcpsidecar.e2e=" + id}
	for _, kv := range eng.Env {
		if v, ok := strings.CutPrefix(kv, "DOCKER_CERT_PATH="); ok {
			kv = "DOCKER_CERT_PATH=" + w.winPath(v)
		}
		env = append(env, kv)
	}
	return env
}

func TestWineDoctorAndSpecCheck(t *testing.T) {
	id, _, _ := hxSetup(t)
	w := newWine(t, id)
	eng := enginehost.Start(t, enginehost.Options{TLS: true}) // Docker 26: no --allow-old-engine
	// The release archive's layout (make dist): the Linux binary of the
	// engine's machine in linux-amd64\ beside mcpsidecar.exe, which takes
	// it from there; no MCPSIDECAR_IMAGE_BINARY.
	beside := filepath.Join(filepath.Dir(w.exePath), "linux-amd64", "mcpsidecar")
	if err := os.MkdirAll(filepath.Dir(beside), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(Binary(t), beside); err != nil {
		t.Fatal(err)
	}
	env := wineEngineEnv(w, eng, id)
	if !strings.Contains(strings.Join(env, " "), `DOCKER_CERT_PATH=Z:\`) {
		t.Fatalf("the engine's certificates are not named by a Windows path: %q", env)
	}
	runsDir := filepath.Join(w.scratch, "runs")
	r := w.run(t, env, "doctor", "--runs-dir", w.winPath(runsDir))
	t.Logf("mcpsidecar.exe doctor under wine against %s: exit %d in %s", eng.Host, r.code, r.took.Round(time.Millisecond))
	if r.code != 0 {
		t.Fatalf("doctor exited %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	runDir := hxOnlyRun(t, runsDir)
	if want := "run results saved to: " + w.winPath(runDir) + "\n"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr has no %q:\n%s", want, r.stderr)
	}
	wineDoctorRecord(t, eng, id, runDir, r.stderr)
	wineWindowsView(t, w, runsDir, runDir)
	wineImageTrustsHostRoots(t, eng, id, hxReadMeta(t, runDir).Image.Tag)
	wineSpecCheck(t, w)
}

// wineDoctorRecord: the checks of a doctor run through the engine alone
// on an engine elsewhere, as on Linux (engineOnlyElsewhere,
// TestVolumeOutputDoctorAndTestSandbox), with the locality a Windows host
// gives: never local.
func wineDoctorRecord(t *testing.T, eng *enginehost.Engine, id, runDir, stderr string) {
	t.Helper()
	for _, name := range hxDoctorArtifacts {
		hxWellFormed(t, filepath.Join(runDir, name))
	}
	m := hxReadMeta(t, runDir)
	if m.Command != "doctor" || !m.Verdict.OK || m.ExitCode != 0 || len(m.ArtifactProblems) > 0 {
		t.Errorf("command %q verdict %v exit %d artifact problems %v", m.Command, m.Verdict.OK, m.ExitCode, m.ArtifactProblems)
	}
	hxCheckHardening(t, m, stderr)
	eoCheckObserved(t, runDir)
	eoCheckDegradations(t, m)

	meta := readRunMetadata(t, runDir)
	const locality = "this host runs windows, not Linux: the engine runs in a VM or elsewhere"
	if meta.Engine.Local || meta.Engine.Locality != locality || !strings.HasPrefix(meta.Engine.Version, "26.") {
		t.Errorf("engine %+v: want Docker 26, not local: %q", meta.Engine, locality)
	}
	bridge := false
	for _, c := range meta.Verdict.Checks {
		if strings.HasPrefix(c.Name, "engine's host has no address on") {
			bridge = c.OK
		}
		if c.OK && strings.Contains(c.Detail, "not observed") {
			t.Errorf("check %q passed on something not observed: %s", c.Name, c.Detail)
		}
	}
	if !bridge {
		t.Errorf("no passing bridge check on the engine's side: %+v", meta.Verdict.Checks)
	}
	for _, kind := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}, {"volume", "ls", "-q"}} {
		if left := eng.Docker(t, append(kind, "--filter", "label=mcpsidecar.e2e="+id)...); left != "" {
			t.Errorf("docker %s on the engine: left %s", kind[0], left)
		}
	}
}

// wineWindowsView: the run directory as a Windows user has it. Its name
// and every file's are names Windows can hold, and every path is under
// MAX_PATH (Explorer and many tools still stop there); no file or
// directory has the read-only attribute (wine shows it as a missing write
// bit), so the user can remove the record; `runs show` of the Windows
// build reads the record back and names its files by Windows paths.
func wineWindowsView(t *testing.T, w *wineHost, runsDir, runDir string) {
	t.Helper()
	if name := filepath.Base(runDir); !regexp.MustCompile(`^run-\d{4}(-\d{2}){5}(-\d+)?$`).MatchString(name) {
		t.Errorf("run directory %q: want run-<UTC date and time>", name)
	}
	files := 0
	err := filepath.WalkDir(runDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if problem := windowsNameProblem(d.Name()); problem != "" {
			t.Errorf("%s: %s", w.winPath(p), problem)
		}
		if n := len(w.winPath(p)); n >= 260 {
			t.Errorf("%s: %d characters, MAX_PATH is 260", w.winPath(p), n)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o200 == 0 {
			t.Errorf("%s is read-only (mode %v): the user could not remove it", w.winPath(p), fi.Mode())
		}
		if !d.IsDir() {
			files++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < len(hxDoctorArtifacts) {
		t.Errorf("%d files in the run directory, want at least %d", files, len(hxDoctorArtifacts))
	}
	r := w.run(t, nil, "runs", "show", "--runs-dir", w.winPath(runsDir))
	want := "Full report: " + w.winPath(filepath.Join(runDir, "report.html"))
	if r.code != 0 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, w.winPath(filepath.Join(runDir, "run-metadata.json"))) {
		t.Errorf("runs show under wine: exit %d, want %q and the artifacts' Windows paths; stdout:\n%s\nstderr:\n%s", r.code, want, r.stdout, r.stderr)
	}
}

// windowsNameProblem says why Windows cannot hold a file named name, or "".
func windowsNameProblem(name string) string {
	if i := strings.IndexAny(name, `<>:"/\|?*`); i >= 0 {
		return fmt.Sprintf("the name holds %q, which Windows refuses in a file name", name[i])
	}
	for _, r := range name {
		if r < 32 {
			return "the name holds a control character"
		}
	}
	if strings.HasSuffix(name, ".") || strings.HasSuffix(name, " ") {
		return "the name ends with a dot or a space, which Windows drops"
	}
	base, _, _ := strings.Cut(strings.ToUpper(name), ".")
	if regexp.MustCompile(`^(CON|PRN|AUX|NUL|COM[1-9]|LPT[1-9])$`).MatchString(base) {
		return "the name is a reserved device name on Windows"
	}
	return ""
}

// wineImageTrustsHostRoots: the image's CA bundle came from the Windows
// build's own store (hostca: on Windows the ROOT certificate store, which
// wine fills from this Linux host's certificates), not from a Linux file:
// it is not Debian's bundle byte for byte, yet trusts every root in it.
func wineImageTrustsHostRoots(t *testing.T, eng *enginehost.Engine, id, tag string) {
	t.Helper()
	cid := eng.Docker(t, "create", "--label", TestLabel, "--label", "mcpsidecar.e2e="+id, tag)
	defer eng.Docker(t, "rm", cid)
	dir := t.TempDir()
	eng.Docker(t, "cp", cid+":/etc/ssl/certs/ca-certificates.crt", filepath.Join(dir, "ca.pem"))
	image, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatalf("this host's CA bundle (apt-get install ca-certificates): %v", err)
	}
	if bytes.Equal(image, host) {
		t.Fatal("the image's CA bundle is Debian's file byte for byte: the Windows build read a Unix path")
	}
	in := map[string]bool{}
	for _, der := range pemCerts(t, image) {
		in[string(der)] = true
	}
	hostCerts := pemCerts(t, host)
	missing := 0
	for _, der := range hostCerts {
		if !in[string(der)] {
			missing++
		}
	}
	if len(hostCerts) == 0 || missing > 0 {
		t.Errorf("the image trusts %d certificates; %d of this host's %d are not among them", len(in), missing, len(hostCerts))
	}
}

// pemCerts are the DER certificates of a PEM bundle, each checked to parse.
func pemCerts(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return out
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			t.Fatalf("a certificate of the bundle does not parse: %v", err)
		}
		out = append(out, blk.Bytes)
	}
}

// wineSpecCheck: `spec check` of the Windows build on spec files named by
// C:\ paths, with Windows line endings: the built-in spec passes, and a
// bad one is refused (exit 3) with the problem at file:line:col, the file
// named as the user named it.
func wineSpecCheck(t *testing.T, w *wineHost) {
	t.Helper()
	def := w.run(t, nil, "spec", "default")
	if def.code != 0 || !strings.Contains(def.stdout, "schema_version") {
		t.Fatalf("spec default under wine: exit %d\n%s%s", def.code, def.stdout, def.stderr)
	}
	crlf := func(s string) []byte { return []byte(strings.ReplaceAll(s, "\n", "\r\n")) }
	good, bad := filepath.Join(w.scratch, "good.toml"), filepath.Join(w.scratch, "bad.toml")
	if err := os.WriteFile(good, crlf(def.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, crlf("schema_version = 1\ncapabilities = [\"network\", \"bogus\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := w.run(t, nil, "spec", "check", w.winPath(good))
	if want := w.winPath(good) + ": ok (capabilities: mcp_client, network, openai_agents; containers: gateway, sidecar, agent)\n"; r.code != 0 || r.stdout != want {
		t.Errorf("spec check %s: exit %d, stdout %q; want 0 and %q (stderr %q)", w.winPath(good), r.code, r.stdout, want, r.stderr)
	}
	r = w.run(t, nil, "spec", "check", w.winPath(bad))
	want := w.winPath(bad) + `:2:28: capabilities[1]: unsupported capability "bogus"`
	if r.code != 3 || !strings.Contains(r.stdout+r.stderr, want) {
		t.Errorf("spec check %s: exit %d; want 3 and %q\nstdout:\n%s\nstderr:\n%s", w.winPath(bad), r.code, want, r.stdout, r.stderr)
	}
}
