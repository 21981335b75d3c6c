package cli

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// leftoverEngine holds containers and networks and removes them on
// request; every other Engine method is absent.
type leftoverEngine struct {
	dockerx.Engine
	containers, networks, volumes []dockerx.Resource
}

func (e *leftoverEngine) ListVolumes(context.Context, map[string]string) ([]dockerx.Resource, error) {
	return e.volumes, nil
}

func (e *leftoverEngine) RemoveVolume(_ context.Context, id string) error {
	e.volumes = without(e.volumes, id)
	return nil
}

func (e *leftoverEngine) ListContainers(context.Context, map[string]string) ([]dockerx.Resource, error) {
	return e.containers, nil
}

func (e *leftoverEngine) ListNetworks(context.Context, map[string]string) ([]dockerx.Resource, error) {
	return e.networks, nil
}

func (e *leftoverEngine) RemoveContainer(_ context.Context, id string) error {
	e.containers = without(e.containers, id)
	return nil
}

func (e *leftoverEngine) RemoveNetwork(_ context.Context, id string) error {
	e.networks = without(e.networks, id)
	return nil
}

func without(rs []dockerx.Resource, id string) []dockerx.Resource {
	var out []dockerx.Resource
	for _, r := range rs {
		if r.ID != id {
			out = append(out, r)
		}
	}
	return out
}

// useEngine makes the commands talk to e instead of Docker.
func useEngine(t *testing.T, e dockerx.Engine) {
	t.Helper()
	orig := connectEngine
	connectEngine = func(context.Context) (dockerx.Engine, func(), error) { return e, func() {}, nil }
	t.Cleanup(func() { connectEngine = orig })
}

// leftover is a resource of run owned by pid on this host.
func leftover(name, run string, pid int, kept bool) dockerx.Resource {
	host, _ := os.Hostname()
	l := map[string]string{orchestrate.LabelApp: "1", orchestrate.LabelHost: host, orchestrate.LabelRun: run, orchestrate.LabelPID: strconv.Itoa(pid)}
	if kept {
		l[orchestrate.LabelKept] = "1"
	}
	return dockerx.Resource{ID: name, Name: name, Labels: l}
}

// deadPID is a pid no process has (above the kernel's pid_max).
const deadPID = 1 << 30

// TestGCKept: gc leaves a kept run's resources; gc --kept removes them.
func TestGCKept(t *testing.T) {
	e := &leftoverEngine{
		containers: []dockerx.Resource{leftover("c-dead", "run-a", deadPID, false), leftover("c-kept", "run-b", deadPID, true), leftover("c-live", "run-c", os.Getpid(), false)},
		networks:   []dockerx.Resource{leftover("n-kept", "run-b", deadPID, true)},
	}
	useEngine(t, e)
	code, out, errs := run(t, "gc")
	if code != ExitOK || !strings.Contains(out, "removed container c-dead (run run-a)") || strings.Contains(out, "removed container c-kept") ||
		!strings.Contains(out, "gc: left 1 run(s) kept with --keep; remove them with: mcpsidecar gc --kept") {
		t.Fatalf("gc = %d:\n%s%s", code, out, errs)
	}
	code, out, errs = run(t, "gc", "--kept", "--json")
	if code != ExitOK || !strings.Contains(out, `"schema": "mcpsidecar.gc/v1"`) || !strings.Contains(out, `"c-kept"`) || !strings.Contains(out, `"n-kept"`) {
		t.Fatalf("gc --kept = %d:\n%s%s", code, out, errs)
	}
	if len(e.containers) != 1 || e.containers[0].Name != "c-live" {
		t.Errorf("left %v, want only the live run's container", e.containers)
	}
}

// TestRunsRm: runs rm removes a kept run's resources and its directory,
// and refuses a run whose harness still runs.
func TestRunsRm(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	kept := writeRun(t, dir, t0, runs.Metadata{Schema: runs.MetadataSchema, Kept: true})
	live := writeRun(t, dir, t0.Add(time.Hour), runs.Metadata{Schema: runs.MetadataSchema})
	e := &leftoverEngine{
		containers: []dockerx.Resource{leftover("gw", kept, deadPID, true), leftover("agent", live, os.Getpid(), false)},
		networks:   []dockerx.Resource{leftover("net", kept, deadPID, true)},
	}
	useEngine(t, e)
	code, out, errs := run(t, "runs", "rm", kept, "--runs-dir", dir)
	if code != ExitOK || !strings.Contains(out, "removed "+kept+": 1 container(s), 1 network(s)") {
		t.Fatalf("runs rm = %d:\n%s%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, kept)); !os.IsNotExist(err) {
		t.Errorf("run directory still there: %v", err)
	}
	if len(e.networks) != 0 || len(e.containers) != 1 {
		t.Errorf("left containers %v, networks %v", e.containers, e.networks)
	}
	code, _, errs = run(t, "runs", "rm", live, "--runs-dir", dir)
	if code == ExitOK || !strings.Contains(errs, "still going") {
		t.Fatalf("runs rm of a live run = %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, live)); err != nil {
		t.Errorf("the live run's directory was removed: %v", err)
	}
}

// TestRunsPrune: prune deletes finished runs older than --older-than and
// leaves kept runs.
func TestRunsPrune(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs")
	now := time.Now().UTC()
	old := writeRun(t, dir, now.Add(-72*time.Hour), runs.Metadata{Schema: runs.MetadataSchema, Finished: now.Add(-72 * time.Hour)})
	recent := writeRun(t, dir, now.Add(-time.Hour), runs.Metadata{Schema: runs.MetadataSchema, Finished: now.Add(-time.Hour)})
	kept := writeRun(t, dir, now.Add(-71*time.Hour), runs.Metadata{Schema: runs.MetadataSchema, Finished: now.Add(-71 * time.Hour), Kept: true})
	code, out, errs := run(t, "runs", "prune", "--older-than", "24h", "--runs-dir", dir)
	if code != ExitOK || !strings.Contains(out, "deleted "+filepath.Join(dir, old)) || !strings.Contains(out, "skipped "+kept+": kept with --keep") {
		t.Fatalf("prune = %d:\n%s%s", code, out, errs)
	}
	ids := runs.IDs(dir)
	if strings.Join(ids, " ") != recent+" "+kept {
		t.Errorf("left %v, want %s and %s", ids, recent, kept)
	}
	if code, _, _ := run(t, "runs", "prune", "--older-than", "-1h", "--runs-dir", dir); code != ExitUsage {
		t.Errorf("negative --older-than: exit %d", code)
	}
}
