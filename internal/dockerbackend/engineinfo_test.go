package dockerbackend

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
)

// rootlessInfo is what rootless Docker over cgroup v1 reports (measured
// on Engine 20.10 here: docs/engine-only.md).
func rootlessInfo() *dockerx.EngineInfo {
	return &dockerx.EngineInfo{Architecture: "x86_64", OSType: "linux", Rootless: true, CgroupDriver: "none", CgroupVersion: "1",
		SecurityOptions: []string{"name=seccomp,profile=default", "name=rootless"}}
}

// TestLifecycleRootless: on a rootless engine the output goes through
// volumes with no variable set, the bridge is checked by a helper on the
// network (the host's interfaces are not asked: the bridge is in
// rootlesskit's namespace), the engine is recorded rootless with its
// machine, and the dropped limits are a degradation the user accepted.
func TestLifecycleRootless(t *testing.T) {
	r := volumeRig(t)
	setEnv(r, EnvOutput, "")
	setEnv(r, EnvAllowNoLimits, "1")
	r.f.InfoAnswer = rootlessInfo()
	asked := false
	bridgeAddrs = func(string) ([]string, error) { asked = true; return []string{}, nil }
	res, err := r.run(context.Background())
	if err != nil && !strings.HasPrefix(err.Error(), "verdict: ") {
		t.Fatalf("run: %v\nstderr:\n%s", err, r.errb.String())
	}
	e := res.Metadata.Engine
	if !e.Rootless || e.Arch != "amd64" || e.Machine != "x86_64" || e.OS != "linux" || e.CgroupDriver != "none" {
		t.Errorf("engine %+v: want rootless, amd64 (x86_64), linux, cgroup driver none", e)
	}
	if asked {
		t.Error("the host's interfaces were asked for a rootless engine's bridge")
	}
	c, ok := findCheckPrefix(res.Metadata.Verdict.Checks, "engine's host has no address on")
	if !ok || !c.OK {
		t.Errorf("bridge check through a helper: %+v (present %v), want a passing one", c, ok)
	}
	if !slices.ContainsFunc(r.f.CallList(), func(c string) bool { return strings.HasPrefix(c, "create-volume ") }) {
		t.Error("no output volume created on a rootless engine")
	}
	if !slices.ContainsFunc(res.Metadata.Degradations, func(d string) bool {
		return strings.Contains(d, "memory, process-count (pids), CPU (CFS quota) limits") && strings.Contains(d, `cgroup driver "none"`) && strings.Contains(d, EnvAllowNoLimits)
	}) {
		t.Errorf("degradations %q: want the dropped limits, accepted", res.Metadata.Degradations)
	}
}

func findCheckPrefix(checks []runs.Check, prefix string) (runs.Check, bool) {
	i := slices.IndexFunc(checks, func(c runs.Check) bool { return strings.HasPrefix(c.Name, prefix) })
	if i < 0 {
		return runs.Check{}, false
	}
	return checks[i], true
}

// TestLifecycleEngineRefusals: what cannot hold on the engine is refused
// with exit 5, the reason and what to do, before anything is created.
func TestLifecycleEngineRefusals(t *testing.T) {
	for _, tc := range []struct {
		name     string
		set      func(r *rig)
		want     []string // in the error
		wantHint string
	}{
		{"rootless, limits dropped", func(r *rig) { r.f.InfoAnswer = rootlessInfo(); setEnv(r, EnvOutput, "") },
			[]string{"memory, process-count (pids), CPU (CFS quota) limits", `rootless Docker over cgroup v1 runs with cgroup driver "none"`}, EnvAllowNoLimits + "=1"},
		{"rootful, no memory cgroup", func(r *rig) {
			r.f.InfoAnswer = &dockerx.EngineInfo{Architecture: "x86_64", OSType: "linux", CgroupDriver: "cgroupfs", PidsLimit: true, CPULimit: true}
		}, []string{"the roles' memory limits", `cgroup driver "cgroupfs", cgroup v1`}, "cgroup v2"},
		{"rootless, bind output", func(r *rig) { r.f.InfoAnswer = rootlessInfo(); setEnv(r, EnvAllowNoLimits, "1") },
			[]string{EnvOutput + "=bind", "rootless Docker", "sub-uids"}, "leave " + EnvOutput + " unset"},
		{"rootless, host-gateway", func(r *rig) {
			r.f.InfoAnswer = rootlessInfo()
			setEnv(r, EnvOutput, "")
			setEnv(r, EnvAllowNoLimits, "1")
			sp := *r.o.Spec.Spec
			sp.AllowedDomains = append(slices.Clone(sp.AllowedDomains), "host.docker.internal:11434")
			r.o.Spec.Spec = &sp
		}, []string{"host.docker.internal", "moby#47684"}, "rootful engine"},
		{"arm64 engine, amd64 binary", func(r *rig) { r.f.Arch = "arm64" },
			[]string{"an ELF linux/amd64 executable", "the engine runs linux/arm64 containers"}, "GOARCH=arm64"},
		{"windows binary", func(r *rig) { writeBin(t, r, peStub()) },
			[]string{"a PE windows/amd64 executable", "linux/amd64 containers"}, sandbox.EnvImageBinary},
		{"arm64 ELF on amd64", func(r *rig) { writeBin(t, r, elfStub(elf.EM_AARCH64)) },
			[]string{"an ELF linux/arm64 executable", "linux/amd64"}, "GOARCH=amd64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, orchestrate.WorkloadCheck)
			tc.set(r)
			_, err := r.run(context.Background())
			code, hint := exitcode.Of(err)
			if code != exitcode.Unavailable || !strings.Contains(hint, tc.wantHint) {
				t.Fatalf("run = %v (code %d, hint %q), want exit %d with a hint naming %q", err, code, hint, exitcode.Unavailable, tc.wantHint)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			noCreate(t, r)
		})
	}
}

// writeBin replaces the rig's image binary.
func writeBin(t *testing.T, r *rig, data []byte) {
	t.Helper()
	if err := os.WriteFile(r.o.Getenv(sandbox.EnvImageBinary), data, 0o755); err != nil {
		t.Fatal(err)
	}
}

func elfStub(m elf.Machine) []byte {
	b := make([]byte, 64)
	copy(b, elf.ELFMAG)
	b[elf.EI_CLASS], b[elf.EI_DATA], b[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint16(b[16:], uint16(elf.ET_EXEC))
	binary.LittleEndian.PutUint16(b[18:], uint16(m))
	binary.LittleEndian.PutUint32(b[20:], uint32(elf.EV_CURRENT))
	binary.LittleEndian.PutUint16(b[52:], 64)
	return b
}

// peStub is a Windows amd64 executable's headers, no section.
func peStub() []byte {
	b := make([]byte, 512)
	copy(b, "MZ")
	binary.LittleEndian.PutUint32(b[0x3c:], 0x40)
	copy(b[0x40:], "PE\x00\x00")
	binary.LittleEndian.PutUint16(b[0x44:], 0x8664)
	return b
}
