package enginehost

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// teardown removes what Start created, in the order that leaves nothing:
// the engine's own containers first, through the engine (runc removes
// their cgroups, nested in the engine container's), then the engine's
// container, its network, its data root and certificates. It fails the
// test for anything still there after.
func (e *Engine) teardown(t testing.TB) {
	t.Helper()
	if e.Host != "" {
		if ids, err := e.DockerErr("ps", "-aq"); err == nil && ids != "" {
			if _, err := e.DockerErr(append([]string{"rm", "-f"}, strings.Fields(ids)...)...); err != nil {
				t.Logf("enginehost: removing the engine's containers: %v", err)
			}
		}
	}
	if out, _ := run(nil, "docker", "ps", "-aq", "--filter", "label="+e.Label); out != "" {
		// SIGTERM: dockerd stops what is left and shuts containerd down.
		_, _ = run(nil, "docker", "stop", "-t", "20", e.Container)
		if _, err := run(nil, "docker", "rm", "-f", "-v", e.Container); err != nil {
			t.Errorf("enginehost: removing the engine's container: %v", err)
		}
	}
	if out, _ := run(nil, "docker", "network", "ls", "-q", "--filter", "label="+e.Label); out != "" {
		if _, err := run(nil, "docker", "network", "rm", e.Network); err != nil {
			t.Errorf("enginehost: removing the network: %v", err)
		}
	}
	for _, dir := range []string{e.DataRoot, e.CertDir, e.SeccompProfile} {
		if dir != "" {
			if err := os.RemoveAll(dir); err != nil {
				t.Errorf("enginehost: removing %s: %v", dir, err)
			}
		}
	}
	e.removeCgroups(t)
	for _, left := range e.leftovers() {
		t.Errorf("enginehost: left behind: %s", left)
	}
}

// leftovers lists what Start created that is still there.
func (e *Engine) leftovers() []string {
	var left []string
	for _, kind := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}} {
		out, err := run(nil, "docker", append(kind, "--filter", "label="+e.Label)...)
		if err != nil {
			left = append(left, err.Error())
		} else if out != "" {
			left = append(left, "docker "+kind[0]+": "+strings.Join(strings.Fields(out), " "))
		}
	}
	for _, dir := range []string{e.DataRoot, e.CertDir} {
		if _, err := os.Stat(dir); dir != "" && !errors.Is(err, fs.ErrNotExist) {
			left = append(left, dir)
		}
	}
	return append(left, e.cgroups()...)
}

// cgroups are the cgroup directories of the engine's container still on
// this host (cgroup v1 hierarchies or v2; cgroupfs or systemd driver).
func (e *Engine) cgroups() []string {
	if e.ID == "" {
		return nil
	}
	var found []string
	for _, pattern := range []string{
		"/sys/fs/cgroup/*/docker/" + e.ID, "/sys/fs/cgroup/docker/" + e.ID,
		"/sys/fs/cgroup/*/system.slice/docker-" + e.ID + ".scope", "/sys/fs/cgroup/system.slice/docker-" + e.ID + ".scope",
	} {
		m, _ := filepath.Glob(pattern)
		found = append(found, m...)
	}
	return found
}

// removeCgroups removes, deepest first, cgroup directories of the engine's
// container that the local engine left because the inner engine's were
// nested in them (each is empty of processes once the container is gone).
func (e *Engine) removeCgroups(t testing.TB) {
	for _, top := range e.cgroups() {
		var dirs []string
		_ = filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			if err := os.Remove(d); err != nil {
				t.Logf("enginehost: removing cgroup %s: %v", d, err)
			}
		}
		t.Logf("enginehost: removed the cgroup %s the local engine left", top)
	}
}
