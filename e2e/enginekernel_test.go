//go:build docker

package e2e

// Issue 31, item 4: the engine's kernel is measured from inside, not
// assumed from this host. A Docker engine in a container whose seccomp
// profile answers the Landlock system calls with ENOSYS
// (enginehost.Options.NoLandlock; filters are inherited and stack) gives
// every container it runs a kernel without Landlock, as a VM whose kernel
// was built without it. Against it, doctor with the default spec stops
// with exit 5 naming the layer, the measured ABI 0 and the spec key that
// accepts it; with that key it passes and records the degradation and
// the ABI 0 it measured. The same doctor against a normal engine on the
// same kernel records this kernel's ABI.

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/testutil/enginehost"
)

func TestEngineKernelWithoutLandlock(t *testing.T) {
	id, _, _ := hxSetup(t)
	hostABI, release := thisKernel(t)
	t.Run("no Landlock", func(t *testing.T) {
		eng := enginehost.Start(t, enginehost.Options{NoLandlock: true})

		runsDir := filepath.Join(t.TempDir(), "runs")
		c, code := RunCLI(t, id, eng.Env, "doctor", "--runs-dir", runsDir)
		stderr := c.Stderr.String()
		if code != exitcode.Unavailable {
			t.Errorf("doctor with the default spec exited %d, want %d:\n%s", code, exitcode.Unavailable, hxTail(stderr, 3000))
		}
		for _, want := range []string{
			"the engine's kernel cannot enforce the hardening layer landlock-fs, which the spec requires: measured inside the gateway's container, Landlock ABI 0",
			`hint: to run without it, accept it in the spec with hardening_best_effort = ["landlock-fs"]: every role then records the missing layer as a degradation`,
			"engine's kernel (measured inside the gateway): Linux " + release + ", Landlock ABI 0,",
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("doctor's stderr lacks %q:\n%s", want, hxTail(stderr, 3000))
			}
		}
		m := readRunMetadata(t, hxOnlyRun(t, runsDir))
		checkKernel(t, m, release, 0, "")
		if rf := m.Hardening[spec.RoleGateway].Refused; m.ExitCode != exitcode.Unavailable || rf == nil || rf.Layer != harden.LayerLandlockFS || rf.KernelABI != 0 {
			t.Errorf("run-metadata.json: exit code %d, gateway's refusal %+v; want %d and landlock-fs at ABI 0", m.ExitCode, rf, exitcode.Unavailable)
		}

		accepted := filepath.Join(t.TempDir(), "sandbox_spec.toml")
		toml := append(spec.DefaultTOML(), "\nhardening_best_effort = [\"landlock-fs\"]\n"...)
		if err := os.WriteFile(accepted, toml, 0o644); err != nil {
			t.Fatal(err)
		}
		runsDir = filepath.Join(t.TempDir(), "runs")
		c, code = RunCLI(t, id, eng.Env, "doctor", "--spec", accepted, "--runs-dir", runsDir)
		runDir := hxOnlyRun(t, runsDir)
		engineOnlyElsewhere(t, eng, id, runDir, code, c.Stderr.String())
		m = readRunMetadata(t, runDir)
		checkKernel(t, m, release, 0, harden.SeccompLoaded)
		for _, role := range []string{spec.RoleGateway, spec.RoleSidecar, spec.RoleAgent} {
			want := role + " hardening degraded (role report): landlock-fs: not fully enforced (kernel Landlock ABI 0)"
			if !slices.ContainsFunc(m.Degradations, func(d string) bool { return strings.HasPrefix(d, want) }) {
				t.Errorf("run-metadata.json's degradations lack %q:\n%s", want, strings.Join(m.Degradations, "\n"))
			}
			if h := m.Hardening[role]; h.KernelABI != 0 || h.ABI != 0 || h.Refused != nil {
				t.Errorf("%s hardening %+v, want kernel ABI 0, none enforced, no refusal", role, h)
			}
		}
	})
	t.Run("normal engine", func(t *testing.T) {
		eng := enginehost.Start(t, enginehost.Options{})
		runsDir := filepath.Join(t.TempDir(), "runs")
		c, code := RunCLI(t, id, eng.Env, "doctor", "--runs-dir", runsDir)
		runDir := hxOnlyRun(t, runsDir)
		engineOnlyElsewhere(t, eng, id, runDir, code, c.Stderr.String())
		checkKernel(t, readRunMetadata(t, runDir), release, hostABI, harden.SeccompLoaded)
		t.Logf("this kernel (%s): Landlock ABI %d, measured inside the gateway on a normal engine", release, hostABI)
	})
}

// checkKernel: run-metadata.json's engine section holds the kernel as the
// gateway measured it from inside: its release, Landlock ABI and seccomp,
// and the limits its cgroup enforces (the engine enforces them).
func checkKernel(t *testing.T, m runs.Metadata, release string, abi int, seccomp string) {
	t.Helper()
	k := m.Engine.Kernel
	if k == nil {
		t.Fatalf("run-metadata.json's engine section has no kernel: %+v", m.Engine)
	}
	if k.Source != "gateway's harden report" || k.Release != release || k.LandlockABI != abi || k.Seccomp != seccomp {
		t.Errorf("engine kernel %+v, want from the gateway's report: release %s, Landlock ABI %d, seccomp %q", k, release, abi, seccomp)
	}
	if k.Cgroup == "" || k.MemoryLimitBytes <= 0 || k.PidsLimit <= 0 || k.Error != "" {
		t.Errorf("engine kernel %+v, want the gateway's cgroup memory and pids limits read from inside", k)
	}
}

// thisKernel is this host's Landlock ABI and release: the engine's
// containers share this kernel, so only the seccomp profile differs.
func thisKernel(t *testing.T) (int, string) {
	t.Helper()
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1) // LANDLOCK_CREATE_RULESET_VERSION
	if errno != 0 || abi < 1 {
		t.Fatalf("this test needs a kernel with Landlock: landlock_create_ruleset: %v", errno)
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	return int(abi), unix.ByteSliceToString(u.Release[:])
}
