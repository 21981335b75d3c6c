//go:build linux

package roles

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/holder"
)

// The Kubernetes backend's hidden commands (the table, table.go). The host runs them in a run's pods (docs/kubernetes.md,
// "How the record is collected"): the holder beside each role, and,
// through the API's exec, the stop and the read of the output files.

// podHardening is the policy of the holder and of the reader: they need
// no network and no process, and read at most dir. Landlock is best
// effort: on a node whose kernel lacks it the role itself fails, and its
// report saying so must still be read.
func podHardening(role string, readDirs ...string) harden.Policy {
	return harden.Policy{
		Schema: harden.Schema, Role: role,
		Landlock: harden.Landlock{MinABI: 4, ReadOnlyDirs: readDirs, ReadOnlyFiles: []string{}, ReadWriteDirs: []string{},
			ReadWriteFiles: []string{}, ConnectTCP: []uint16{}, BindTCP: []uint16{}},
		NoSpawn: true, DenyUnixSockets: true, NoListen: true, NoUDP: true, NoNetlink: true,
		BestEffort: []string{harden.LayerLandlockFS, harden.LayerLandlockNet},
		GoMaxProcs: 1,
	}
}

// lockDown applies p to this process and prints its degradations.
func lockDown(p harden.Policy, errw io.Writer) error {
	rep, err := applyHarden(p)
	for _, d := range rep.Degradations {
		fmt.Fprintf(errw, "mcpsidecar %s: hardening degraded: %s\n", p.Role, d)
	}
	if err != nil {
		return fmt.Errorf("hardening %s: %w", p.Role, err)
	}
	return nil
}

// kubeHoldCmd is the holder container's process: it locks itself down
// and waits for its stop signal. Its pod, and so the output volume it
// mounts read-only, stays while it runs.
func kubeHoldCmd(ctx context.Context, args []string, s Streams) error {
	f := newFlags(holder.HoldCommand, "Wait until stopped, keeping a Kubernetes pod and its output volume (the holder container)", s)
	if err := f.noArgs(args); err != nil {
		return err
	}
	if err := lockDown(podHardening(holder.HoldCommand), s.Err); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// signalInit sends the stop signal to the container's PID 1; tests
// replace it.
var signalInit = func() error { return syscall.Kill(1, syscall.SIGTERM) }

// procCmdline reads a process's command line; tests replace it.
var procCmdline = func(pid int) ([]byte, error) { return os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)) }

// newKubeStopCmd stops a role from inside its container: Kubernetes has
// no call that stops one container of a pod, and the role, PID 1 of its
// container, writes its last record lines when SIGTERM arrives. It
// signals only a PID 1 that is this same program (its command line starts
// with our path): run anywhere else, on a host by mistake, it would stop
// that host's init. It applies no hardening: it makes one system call and
// exits, under the container's own seccomp profile.
func kubeStopCmd(_ context.Context, args []string, s Streams) error {
	f := newFlags(holder.StopCommand, "Send SIGTERM to this container's role, PID 1 (the Kubernetes backend's stop)", s)
	if err := f.noArgs(args); err != nil {
		return err
	}
	b, err := procCmdline(1)
	if err != nil {
		return fmt.Errorf("%s: reading PID 1's command line: %w", holder.StopCommand, err)
	}
	argv0, _, _ := bytes.Cut(b, []byte{0})
	if string(argv0) != holder.ImageBinary {
		return fmt.Errorf("%s: PID 1 is %q, not %s: not in a role's container, nothing signalled", holder.StopCommand, argv0, holder.ImageBinary)
	}
	if err := signalInit(); err != nil {
		return fmt.Errorf("%s: signalling PID 1: %w", holder.StopCommand, err)
	}
	fmt.Fprintf(s.Err, "%s: SIGTERM sent to PID 1\n", holder.StopCommand)
	return nil
}

// kubeReadCmd writes the named files of the output directory as a tar
// on stdout (holder.WriteOutput): how the host reads a pod's output volume
// through the API, from the holder, without depending on the node. It
// locks itself down to reading that directory first: the files were
// written by the sandboxed role.
func kubeReadCmd(_ context.Context, args []string, s Streams) error {
	var dir string
	var limit int64
	f := newFlags(holder.ReadCommand+" --dir DIR --max BYTES -- NAME...", "Write the named regular files of DIR as a tar on stdout (the Kubernetes backend's record reader)", s)
	f.StringVar(&dir, "dir", "", "directory the files are in (absolute)")
	f.Int64Var(&limit, "max", 0, "largest file read, in bytes")
	names, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return usageErrorf("requires at least 1 arg(s), only received 0")
	}
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || limit <= 0 {
		return usageErrorf("%s: --dir (an absolute, clean path) and a positive --max are required", holder.ReadCommand)
	}
	for _, n := range names {
		if err := holder.ValidOutputName(n); err != nil {
			return usageErrorf("%s: %v", holder.ReadCommand, err)
		}
	}
	if err := lockDown(podHardening(holder.ReadCommand, dir), s.Err); err != nil {
		return err
	}
	return holder.WriteOutput(s.Out, dir, names, limit, s.Err)
}
