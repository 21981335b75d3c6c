//go:build linux

package launcher

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/mcpsidecar/mcpsidecar/internal/noexec"
)

// volumeContainer is the mount table of a workload container whose image
// declares VOLUME /tmp/v, /sandbox-work/v and /sandbox-output/sub (as
// redteam2's volume-exec shows it), with a read-only bind below /tmp and
// Docker's own files.
const volumeContainer = `600 500 0:50 / / ro,relatime master:1 - overlay overlay rw,lowerdir=/l
601 600 0:51 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
602 600 0:52 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
610 600 0:60 / /tmp rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,size=65536k
611 600 0:61 / /sandbox-work rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,size=65536k
612 600 254:1 /runs/run-1/agent /sandbox-output rw,nosuid,nodev,noexec,relatime - ext4 /dev/vda1 rw
613 610 254:1 /var/lib/docker/volumes/a/_data /tmp/v rw,relatime master:1 - ext4 /dev/vda1 rw
614 611 254:1 /var/lib/docker/volumes/b/_data /sandbox-work/v rw,relatime master:1 - ext4 /dev/vda1 rw
615 612 254:1 /var/lib/docker/volumes/c/_data /sandbox-output/sub rw,relatime master:1 - ext4 /dev/vda1 rw
616 610 254:1 /srv/fixture /tmp/fixture ro,relatime - ext4 /dev/vda1 rw
617 600 254:1 /var/lib/docker/containers/x/hosts /etc/hosts rw,relatime - ext4 /dev/vda1 rw
`

func table(t *testing.T, data string) []noexec.MountPoint {
	t.Helper()
	ms, err := noexec.ParseMountinfo(data)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestWritableMountProblems: every read-write mount at or below a
// writable path, and the one holding it, must be noexec,nosuid,nodev; a
// read-only one and one elsewhere (/etc/hosts) are not judged.
func TestWritableMountProblems(t *testing.T) {
	ms := table(t, volumeContainer)
	type got struct {
		Point   string
		Missing string
		Holding bool
	}
	for _, tt := range []struct {
		path string
		want []got
	}{
		{"/tmp", []got{{"/tmp/v", "noexec,nosuid,nodev", false}}},
		{"/sandbox-work", []got{{"/sandbox-work/v", "noexec,nosuid,nodev", false}}},
		{"/sandbox-work/allowed", nil}, // held by the /sandbox-work tmpfs, nothing below
		{"/sandbox-output", []got{{"/sandbox-output/sub", "noexec,nosuid,nodev", false}}},
		{"/tmp/v", []got{{"/tmp/v", "noexec,nosuid,nodev", true}}},
		{"/dev/shm", []got{{"/dev", "noexec,nodev", true}}},
		{"/usr", nil}, // held by the read-only root
		{"/etc", []got{{"/etc/hosts", "noexec,nosuid,nodev", false}}}, // were /etc writable, so would be the file below it
	} {
		var g []got
		for _, p := range writableMountProblems(ms, tt.path) {
			g = append(g, got{p.Point, strings.Join(p.Missing, ","), p.Holding})
		}
		if d := cmp.Diff(tt.want, g); d != "" {
			t.Errorf("%s (-want +got):\n%s", tt.path, d)
		}
	}
}

// TestLaunchRefusesWritableVolumes: a launch in that container stops with
// exit 5 before anything is applied, naming each volume below a writable
// path; the output directory the harness accepted as not noexec excuses
// the mount holding it, never a volume below it.
func TestLaunchRefusesWritableVolumes(t *testing.T) {
	p := basePolicy("/tmp", "/sandbox-work", "/sandbox-output")
	read := func() (string, error) { return volumeContainer, nil }
	err := checkWritable(&Options{checkNoexec: func(string) error { return nil }, mountinfo: read}, p, "")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitUnavailable {
		t.Fatalf("checkWritable = %v, want exit %d", err, ExitUnavailable)
	}
	for _, m := range []string{"/tmp/v", "/sandbox-work/v", "/sandbox-output/sub", "rebuild the image without it"} {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("the refusal does not name %s: %v", m, err)
		}
	}

	// The harness accepted an exec output directory: the bind holding it
	// passes (a note), the volume below it does not.
	plainOut := strings.Replace(volumeContainer, "/sandbox-output rw,nosuid,nodev,noexec,relatime", "/sandbox-output rw,relatime", 1)
	p = basePolicy("/tmp", "/sandbox-output")
	o := &Options{checkNoexec: func(string) error { return nil }, mountinfo: func() (string, error) { return plainOut, nil }}
	err = checkWritable(o, p, "/sandbox-output")
	if err == nil || strings.Contains(err.Error(), "the mount holding it, /sandbox-output ") || !strings.Contains(err.Error(), "/sandbox-output/sub") {
		t.Errorf("accepted output directory: %v, want only the volume below it refused", err)
	}
	clean := strings.Join(strings.Split(plainOut, "\n")[:6], "\n") + "\n" // no volumes
	o.mountinfo = func() (string, error) { return clean, nil }
	if err := checkWritable(o, p, "/sandbox-output"); err != nil {
		t.Errorf("accepted output directory without volumes: %v", err)
	}
	if err := checkWritable(o, p, ""); err == nil || !strings.Contains(err.Error(), "the mount holding it, /sandbox-output") {
		t.Errorf("an exec output directory nobody accepted: %v, want it refused", err)
	}

	o.mountinfo = func() (string, error) { return "", errors.New("no /proc") }
	if err := checkWritable(o, p, ""); !errors.As(err, &ee) || ee.Code != ExitUnavailable {
		t.Errorf("unreadable mount table: %v, want exit %d", err, ExitUnavailable)
	}
}

// TestCheckWritableRealVolume: as root, on this kernel, a plain tmpfs
// mounted below a noexec one (what an image VOLUME is) stops the check,
// which the statfs of the writable directory alone passes.
func TestCheckWritableRealVolume(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Log("not root: no mount can be made; TestLaunchRefusesWritableVolumes proves the walk on a synthetic table")
		return
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOEXEC|unix.MS_NOSUID|unix.MS_NODEV, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	if err := checkWritable(&Options{}, basePolicy(dir), ""); err != nil {
		t.Fatalf("a noexec tmpfs alone: %v", err)
	}
	vol := filepath.Join(dir, "v")
	if err := os.Mkdir(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", vol, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(vol, unix.MNT_DETACH) })
	err := checkWritable(&Options{}, basePolicy(dir), "")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitUnavailable || !strings.Contains(err.Error(), "a mount below it, "+vol) {
		t.Errorf("an exec mount below the writable directory: %v, want exit %d naming %s", err, ExitUnavailable, vol)
	}
}

// BenchmarkCheckWritableMounts: the mount walk as the launcher runs it,
// this process's own /proc/self/mountinfo read and parsed, the agent's
// three writable directories checked.
func BenchmarkCheckWritableMounts(b *testing.B) {
	p := basePolicy("/tmp", "/sandbox-work", "/sandbox-output")
	data, _ := os.ReadFile("/proc/self/mountinfo")
	b.Logf("%d mounts in this process's table", strings.Count(string(data), "\n"))
	for b.Loop() {
		checkWritableMounts(&Options{}, p, "")
	}
}
