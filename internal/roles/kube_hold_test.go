//go:build linux

package roles

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/holder"
)

// stubHarden replaces the real hardening (irreversible for the test
// process) and records the policies applied.
func stubHarden(t *testing.T, rep harden.Report, err error) *[]harden.Policy {
	t.Helper()
	var applied []harden.Policy
	old := applyHarden
	applyHarden = func(p harden.Policy) (harden.Report, error) {
		if verr := p.Validate(); verr != nil {
			t.Errorf("invalid policy: %v", verr)
		}
		applied = append(applied, p)
		return rep, err
	}
	t.Cleanup(func() { applyHarden = old })
	return &applied
}

// TestKubeReadOutput: the reader locks itself down to reading the
// directory (no network, no process, nothing written) before it reads,
// writes the named files as a tar on stdout, untouched by the host
// streams' text cleaning, and says on stderr what it left out.
func TestKubeReadOutput(t *testing.T) {
	applied := stubHarden(t, harden.Report{Degradations: []string{"landlock-net: not fully enforced"}}, nil)
	dir := t.TempDir()
	body := "{\"a\":1}\n\x1b[31mraw\x1b[0m\n" // a terminal escape stays as written
	if err := os.WriteFile(filepath.Join(dir, "egress-decisions.jsonl"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "harden-report.json")); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	args := holder.ReadArgs(dir, 1000, []string{"egress-decisions.jsonl", "harden-report.json"})[1:]
	if code := Run(context.Background(), args, Streams{In: strings.NewReader(""), Out: &out, Err: &errb}); code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errb.String())
	}
	tr := tar.NewReader(&out)
	h, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(tr)
	if h.Name != "egress-decisions.jsonl" || string(got) != body {
		t.Errorf("entry %q = %q, want the decision log as written", h.Name, got)
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("a second entry (%v): the link was read", err)
	}
	if !strings.Contains(errb.String(), holder.ReadProblem+"harden-report.json: a symbolic link") ||
		!strings.Contains(errb.String(), "mcpsidecar kube-read-output: hardening degraded: landlock-net") {
		t.Errorf("stderr %q", errb.String())
	}
	if len(*applied) != 1 {
		t.Fatalf("%d policies applied, want 1", len(*applied))
	}
	p := (*applied)[0]
	if !slices.Equal(p.Landlock.ReadOnlyDirs, []string{dir}) || len(p.Landlock.ReadWriteDirs)+len(p.Landlock.ReadWriteFiles)+len(p.Landlock.ExecFiles) != 0 ||
		len(p.Landlock.ConnectTCP)+len(p.Landlock.BindTCP) != 0 || !p.NoSpawn || !p.NoListen || !p.NoUDP || !p.NoNetlink || !p.DenyUnixSockets {
		t.Errorf("policy %+v: want read-only %s, no network, no process", p, dir)
	}
}

// TestKubeReadOutputRefusals: bad arguments are usage errors before
// anything is applied or read; a failed hardening stops the read.
func TestKubeReadOutputRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name string
		args []string
		fail error
		code int
	}{
		{"relative dir", []string{holder.ReadCommand, "--dir", "out", "--max", "5", "--", "a"}, nil, exitUsage},
		{"no max", []string{holder.ReadCommand, "--dir", dir, "--", "a"}, nil, exitUsage},
		{"path name", []string{holder.ReadCommand, "--dir", dir, "--max", "5", "--", "../a"}, nil, exitUsage},
		{"no names", []string{holder.ReadCommand, "--dir", dir, "--max", "5"}, nil, exitUsage},
		{"hardening fails", []string{holder.ReadCommand, "--dir", dir, "--max", "5", "--", "a"}, errors.New("no seccomp"), exitRuntime},
	} {
		t.Run(tt.name, func(t *testing.T) {
			applied := stubHarden(t, harden.Report{}, tt.fail)
			var out, errb bytes.Buffer
			if code := Run(context.Background(), tt.args, Streams{In: strings.NewReader(""), Out: &out, Err: &errb}); code != tt.code {
				t.Errorf("exit %d, want %d; stderr %s", code, tt.code, errb.String())
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q, want nothing", out.String())
			}
			if tt.code == exitUsage && len(*applied) != 0 {
				t.Error("hardening applied before the arguments were checked")
			}
		})
	}
}

// TestKubeStop: the stop signals PID 1 only when PID 1 is our binary (a
// role's container); anywhere else it refuses and signals nothing.
func TestKubeStop(t *testing.T) {
	for _, tt := range []struct {
		name, cmdline string
		code          int
	}{
		{"role", holder.ImageBinary + "\x00gateway\x00--listen\x00:3128\x00", exitOK},
		{"host init", "/sbin/init\x00splash\x00", exitRuntime},
		{"look-alike", holder.ImageBinary + "-evil\x00", exitRuntime},
	} {
		t.Run(tt.name, func(t *testing.T) {
			signalled := 0
			oldSig, oldCmd := signalInit, procCmdline
			signalInit = func() error { signalled++; return nil }
			procCmdline = func(pid int) ([]byte, error) {
				if pid != 1 {
					t.Errorf("read the command line of PID %d", pid)
				}
				return []byte(tt.cmdline), nil
			}
			t.Cleanup(func() { signalInit, procCmdline = oldSig, oldCmd })
			var errb bytes.Buffer
			code := Run(context.Background(), holder.StopArgs()[1:], Streams{In: strings.NewReader(""), Out: io.Discard, Err: &errb})
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr %s", code, tt.code, errb.String())
			}
			if want := map[bool]int{true: 1, false: 0}[tt.code == exitOK]; signalled != want {
				t.Errorf("signalled %d times, want %d", signalled, want)
			}
		})
	}
}

// TestKubeHold: the holder locks itself down (nothing to read, no
// network, no process) and returns once its context ends (SIGTERM).
func TestKubeHold(t *testing.T) {
	applied := stubHarden(t, harden.Report{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, holder.HolderArgs()[1:], Streams{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
	}()
	select {
	case code := <-done:
		t.Fatalf("the holder ended (%d) before its stop", code)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d, want 0", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the holder did not end after its stop")
	}
	if len(*applied) != 1 || len((*applied)[0].Landlock.ReadOnlyDirs) != 0 || !(*applied)[0].NoSpawn {
		t.Errorf("policies %+v", *applied)
	}
}
