package sandbox

import (
	"context"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// TestOwnWorkloadImageVolumes: an image that declares VOLUME is refused,
// exit 5, naming every path and what to do, under run and test-sandbox,
// before any network or container is created.
func TestOwnWorkloadImageVolumes(t *testing.T) {
	vols := []string{"/sandbox-output/sub", "/sandbox-work/v", "/tmp/v"}
	for _, w := range []struct {
		name     string
		command  string
		workload orchestrate.Workload
	}{{"run", "run", orchestrate.WorkloadAgent}, {"test-sandbox", "test-sandbox", orchestrate.WorkloadProbe}} {
		t.Run(w.name, func(t *testing.T) {
			r := runRig(t)
			r.o.Command, r.o.Workload = w.command, w.workload
			r.f.Images["team/vol:1"] = true
			r.f.ImageVolumes = map[string][]string{"team/vol:1": vols}
			r.o.Own = &OwnWorkload{Image: "team/vol:1", Pull: PullNever}
			_, err := r.run(context.Background())
			code, hint := exitcode.Of(err)
			if code != exitcode.Unavailable {
				t.Fatalf("run = %v (exit %d), want exit %d", err, code, exitcode.Unavailable)
			}
			want := "workload image team/vol:1 declares VOLUME /sandbox-output/sub, /sandbox-work/v, /tmp/v"
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not contain %q", err, want)
			}
			if !strings.Contains(hint, "rebuild the image without VOLUME") {
				t.Errorf("hint %q says nothing of what to do", hint)
			}
			for _, c := range r.f.CallList() {
				if strings.HasPrefix(c, "create") {
					t.Errorf("%s before the refusal", c)
				}
			}
		})
	}
}

// TestOwnWorkloadMountsArePlanned: every container is created with
// exactly the mounts and tmpfs of the plan, the workload's with one more,
// the launcher, read-only: no mount of the harness's making is left
// unaccounted for.
func TestOwnWorkloadMountsArePlanned(t *testing.T) {
	r := runRig(t)
	r.f.Images["team/agent:1"] = true
	r.o.Own = &OwnWorkload{Image: "team/agent:1", Command: []string{"python3", "/app/agent.py"}, Pull: PullNever}
	var planned orchestrate.Plan
	r.o.Plan = func(p *orchestrate.Plan) error {
		planned = *p
		planned.Containers = slices.Clone(p.Containers)
		for i := range planned.Containers {
			planned.Containers[i].Spec.Mounts = slices.Clone(p.Containers[i].Spec.Mounts)
			planned.Containers[i].Spec.Tmpfs = maps.Clone(p.Containers[i].Spec.Tmpfs)
		}
		return nil
	}
	// The rig's workload leaves no audit log, so the verdict fails; the
	// containers were created all the same.
	_, err := r.run(context.Background())
	if len(planned.Containers) == 0 {
		t.Fatalf("the plan hook never ran (run: %v)", err)
	}
	for _, st := range planned.Containers {
		got, ok := r.f.Specs[st.Spec.Name]
		if !ok {
			t.Errorf("%s: not created", st.Spec.Name)
			continue
		}
		want := st.Spec.Mounts
		if st.Role == orchestrate.RoleAgent { // the launcher: a private copy (TestOwnWorkloadPlan)
			i := slices.IndexFunc(got.Mounts, func(m dockerx.Mount) bool { return m.Target == LauncherPath })
			if i < 0 {
				t.Fatalf("no launcher mount: %+v", got.Mounts)
			}
			want = append(slices.Clone(want), dockerx.Mount{Source: got.Mounts[i].Source, Target: LauncherPath, ReadOnly: true})
		}
		if d := cmp.Diff(want, got.Mounts); d != "" {
			t.Errorf("%s mounts (-planned +created):\n%s", st.Role, d)
		}
		if d := cmp.Diff(st.Spec.Tmpfs, got.Tmpfs); d != "" {
			t.Errorf("%s tmpfs (-planned +created):\n%s", st.Role, d)
		}
	}
}

// volumeEngine answers InspectImage: present, declaring volumes.
type volumeEngine struct {
	dockerx.Engine
	volumes []string
}

func (e volumeEngine) InspectImage(context.Context, string) (dockerx.ImageInfo, bool, error) {
	return dockerx.ImageInfo{Volumes: e.volumes}, true, nil
}

// TestSquidImageVolumes: a Squid image that declares VOLUME is refused
// like a workload image's (Squid writes its cache and logs there).
func TestSquidImageVolumes(t *testing.T) {
	withNet, err := spec.Resolve(&spec.Spec{Source: "<t>", SchemaVersion: 1, Capabilities: []string{spec.CapNetwork},
		AllowedDomains: []string{".example.com"}, AllowedIPs: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	j := &job{s: Output{Out: io.Discard, Err: io.Discard}, o: Options{GatewayEngine: orchestrate.EngineSquid, SquidImage: "ubuntu/squid:5"},
		profile: withNet, engine: volumeEngine{volumes: []string{"/var/log/squid", "/var/spool/squid"}}}
	err = j.checkGateway(context.Background())
	if code, _ := exitcode.Of(err); code != exitcode.Unavailable ||
		!strings.Contains(err.Error(), "the Squid image ubuntu/squid:5 declares VOLUME /var/log/squid, /var/spool/squid") {
		t.Fatalf("checkGateway = %v (exit %d), want exit 5 naming both volumes", err, code)
	}
}

// TestOwnImageNoVolume: our own runtime image declares no volume, so
// its containers get only the planned mounts.
func TestOwnImageNoVolume(t *testing.T) {
	if strings.Contains(strings.ToUpper(spec.Dockerfile), "VOLUME") {
		t.Errorf("the runtime image declares a volume:\n%s", spec.Dockerfile)
	}
}
