package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/kube"
	kubebackend "github.com/mcpsidecar/mcpsidecar/internal/kube/backend"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
)

// fakeCluster holds run namespaces and removes them on request, except
// those in refuse.
type fakeCluster struct {
	namespaces []kube.Leftover
	listErr    error
	refuse     map[string]bool
	removed    []string
	flags      backendFlags // what gc connected with
}

func (f *fakeCluster) Leftovers(context.Context) ([]kube.Leftover, error) {
	return f.namespaces, f.listErr
}

func (f *fakeCluster) Remove(_ context.Context, ls []kube.Leftover) ([]kube.Leftover, error) {
	var gone []kube.Leftover
	var errs []error
	for _, l := range ls {
		if f.refuse[l.Name] {
			errs = append(errs, errors.New("deleting namespace "+l.Name+": forbidden"))
			continue
		}
		f.removed = append(f.removed, l.Name)
		gone = append(gone, l)
	}
	return gone, errors.Join(errs...)
}

// useCluster makes gc talk to f instead of a cluster, and fails the test
// if it asks for Docker.
func useCluster(t *testing.T, f *fakeCluster) {
	t.Helper()
	orig, origEngine := connectKubeGC, connectEngine
	connectKubeGC = func(b backendFlags) (kubebackend.Namespaces, error) { f.flags = b; return f, nil }
	connectEngine = func(context.Context) (dockerx.Engine, func(), error) {
		t.Error("gc on the Kubernetes backend asked for the Docker engine")
		return nil, nil, errors.New("no Docker in this test")
	}
	t.Cleanup(func() { connectKubeGC, connectEngine = orig, origEngine })
}

// leftoverNS is run's namespace, owned by pid on this host.
func leftoverNS(run string, pid int, kept bool) kube.Leftover {
	r := leftover("mcpsidecar-"+run, run, pid, kept)
	return kube.Leftover{Name: r.Name, UID: "uid-" + run, Labels: r.Labels}
}

// theCluster holds one namespace of each kind gc must tell apart.
func theCluster() *fakeCluster {
	other := leftoverNS("other-host", deadPID, false)
	other.Labels[orchestrate.LabelHost] = "another-host"
	going := leftoverNS("going", deadPID, false)
	going.Terminating = true
	return &fakeCluster{namespaces: []kube.Leftover{
		leftoverNS("dead", deadPID, false), going, leftoverNS("live", os.Getpid(), false), other,
		leftoverNS("kept", deadPID, true),
	}}
}

// TestGCKube: gc --backend kubernetes removes this host's namespaces of
// dead runs, a Terminating one counted, and leaves live, other hosts'
// and kept ones; it never asks for Docker.
func TestGCKube(t *testing.T) {
	f := theCluster()
	useCluster(t, f)
	code, out, errs := run(t, "gc", "--backend", "kubernetes", "--kubeconfig", "/k/config", "--context", "ctx", "--runs-dir", t.TempDir())
	if code != ExitOK {
		t.Fatalf("gc = %d:\n%s%s", code, out, errs)
	}
	want := "removed namespace mcpsidecar-dead (run dead)\n" +
		"removed namespace mcpsidecar-going (run going; it was already being deleted)\n" +
		"gc: removed 2 namespace(s)\n" +
		"gc: left 1 run(s) kept with --keep; remove them with: mcpsidecar gc --backend kubernetes --kept\n"
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
	if !slices.Equal(f.removed, []string{"mcpsidecar-dead", "mcpsidecar-going"}) {
		t.Errorf("removed %v, want the dead and the terminating namespaces", f.removed)
	}
	if f.flags.kubeconfigPath() != "/k/config" || f.flags.context != "ctx" {
		t.Errorf("connected with kubeconfig %q context %q, want /k/config and ctx", f.flags.kubeconfigPath(), f.flags.context)
	}
}

// TestGCKubeKeptFromEnv: MCPSIDECAR_BACKEND chooses the backend, and
// --kept also removes kept namespaces.
func TestGCKubeKeptFromEnv(t *testing.T) {
	t.Setenv(envBackend, backendKubernetes)
	f := theCluster()
	useCluster(t, f)
	code, out, errs := run(t, "gc", "--kept", "--runs-dir", t.TempDir())
	if code != ExitOK || strings.Contains(out, "left") {
		t.Fatalf("gc --kept = %d:\n%s%s", code, out, errs)
	}
	if !slices.Equal(f.removed, []string{"mcpsidecar-dead", "mcpsidecar-going", "mcpsidecar-kept"}) {
		t.Errorf("removed %v, want dead, going and kept", f.removed)
	}
}

// TestGCKubeJSON: the document has the Docker one's arrays, empty, and
// the namespaces removed.
func TestGCKubeJSON(t *testing.T) {
	useCluster(t, theCluster())
	code, out, errs := run(t, "gc", "--backend", "kubernetes", "--json", "--runs-dir", t.TempDir())
	if code != ExitOK {
		t.Fatalf("gc --json = %d:\n%s%s", code, out, errs)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil || strings.Contains(out, ": null") {
		t.Fatalf("not one JSON object without null (%v):\n%s", err, out)
	}
	host, _ := os.Hostname()
	out = strings.ReplaceAll(out, `"mcpsidecar.host": "`+host+`"`, `"mcpsidecar.host": "$HOST"`)
	golden(t, filepath.Join("json", "gc-kube.json"), []byte(out))
}

// TestGCKubeErrors: each failure names what failed and what to do, with
// its exit code; under --json the document is still printed.
func TestGCKubeErrors(t *testing.T) {
	tests := []struct {
		name   string
		f      *fakeCluster
		json   bool
		code   int
		inErr  []string
		schema string
	}{
		{"list", &fakeCluster{listErr: errors.New("listing run namespaces (mcpsidecar=1): connection refused")}, false, ExitUnavailable,
			[]string{"listing run namespaces", "connection refused", "is the cluster up"}, ""},
		{"delete", func() *fakeCluster { f := theCluster(); f.refuse = map[string]bool{"mcpsidecar-dead": true}; return f }(), false, ExitRuntime,
			[]string{"removing run namespaces: deleting namespace mcpsidecar-dead: forbidden", "run gc again"}, ""},
		{"delete-json", func() *fakeCluster { f := theCluster(); f.refuse = map[string]bool{"mcpsidecar-dead": true}; return f }(), true, ExitRuntime,
			[]string{"deleting namespace mcpsidecar-dead"}, gcSchema},
		{"list-json", &fakeCluster{listErr: errors.New("listing run namespaces: refused")}, true, ExitUnavailable,
			[]string{"listing run namespaces"}, errorSchema},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			useCluster(t, tt.f)
			args := []string{"gc", "--backend", "kubernetes", "--runs-dir", t.TempDir()}
			if tt.json {
				args = append(args, "--json")
			}
			code, out, errs := run(t, args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d:\n%s%s", code, tt.code, out, errs)
			}
			for _, s := range tt.inErr {
				if !strings.Contains(errs, s) {
					t.Errorf("stderr does not say %q:\n%s", s, errs)
				}
			}
			if tt.schema != "" && !strings.HasPrefix(out, "{\n  \"schema\": \""+tt.schema+"\"") {
				t.Errorf("stdout is not one %s document:\n%s", tt.schema, out)
			}
		})
	}
}

// TestGCKubeConnect: the real connection names a kubeconfig it cannot
// load and says what to do; a backend gc does not know is a usage error.
func TestGCKubeConnect(t *testing.T) {
	code, _, errs := run(t, "gc", "--backend", "kubernetes", "--kubeconfig", filepath.Join(t.TempDir(), "missing"), "--runs-dir", t.TempDir())
	if code != ExitUnavailable || !strings.Contains(errs, "loading kubeconfig") || !strings.Contains(errs, "--kubeconfig") {
		t.Errorf("gc with a missing kubeconfig = %d:\n%s", code, errs)
	}
	code, _, errs = run(t, "gc", "--backend", "podman")
	if code != ExitUsage || !strings.Contains(errs, `--backend "podman"`) {
		t.Errorf("gc --backend podman = %d:\n%s", code, errs)
	}
}
