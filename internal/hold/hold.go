// Package hold owns both ends of the start hold. The harness holds each
// role at start, hardened but before its work, while it looks at it from
// outside: it reads the kernel's account of the role's process (seccomp,
// no_new_privs, capabilities, uid), and on an engine older than 25, which
// gives a container on an --internal network a default route, it removes
// that route from the container's network namespace. A role that ends
// fast cannot end unseen. So the plan starts such a container with [Env]
// naming a release file in its output directory (host side: [Path] in the
// plan, [Release] once the role is observed and its namespace prepared),
// and the process waits for that file once it has hardened itself and
// written its report, before any work (container side: [FromEnv] in the
// roles' hardening, [Wait] in the launcher before it executes the
// workload).
package hold

import (
	"bytes"
	"context"
	"crypto/subtle"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Env names the release file a held role waits for.
const Env = "MCPSIDECAR_HOLD_FILE"

// TokenEnv is the run's release token: the release file the harness
// creates holds it, and a held role takes no other. Threat: a file at the
// release path the harness did not write (planted by an image whose
// content Docker copied into an empty volume, or by anything before the
// harness) would let the role start unobserved.
const TokenEnv = "MCPSIDECAR_HOLD_TOKEN"

// maxToken bounds what Wait reads of a release file.
const maxToken = 256

// partialWait is how long Wait waits for a release file that holds a
// beginning of the token, or nothing yet, to hold all of it: the harness
// creates the file, then writes the token into it, and a role polling
// meanwhile sees it between the two (32 concurrent runs did).
const partialWait = 500 * time.Millisecond

// File is the release file's name in the role's output directory.
const File = ".mcpsidecar-start"

// ReleaseCommand is our binary's hidden command that creates a release
// file (--file PATH): how the host releases a held role whose output
// directory is an engine volume, by an exec in the output holder.
const ReleaseCommand = "hold-release"

// Timeout bounds how long a held role waits for the harness.
const Timeout = 2 * time.Minute

// Path is Env's value for a role whose output directory is mounted at
// target inside its container.
func Path(target string) string { return target + "/" + File }

// Release lets a held role go on: write creates the release file, holding
// token, in the role's output directory on the host (runs.Dir.Write,
// which refuses to follow a link the container planted).
func Release(role, token string, write func(name string, data []byte) error) error {
	return write(filepath.Join(role, File), []byte(token))
}

// FromEnv holds as $MCPSIDECAR_HOLD_FILE says, then unsets it: the hold is
// for this process only, and a child it starts (under shell_access) must
// not wait for a release file that is already gone.
func FromEnv(ctx context.Context, timeout time.Duration) error {
	err := Wait(ctx, os.Getenv(Env), os.Getenv(TokenEnv), timeout)
	_ = os.Unsetenv(Env)
	_ = os.Unsetenv(TokenEnv)
	return err
}

// Wait waits, before any work, until the harness creates file holding
// token, and removes it. Nothing of the role's work has run yet, so
// nothing can race it. An empty file means no hold. A release file that
// does not hold token is refused: the harness did not write it. When ctx
// ends (the harness stops a role it never released: SIGTERM), it returns
// at once, with ctx's error.
func Wait(ctx context.Context, file, token string, timeout time.Duration) error {
	if file == "" {
		return nil
	}
	if token == "" {
		return fmt.Errorf("held (%s) with no release token (%s): refusing to start", file, TokenEnv)
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	refused := fmt.Errorf("the release file %s is not the harness's (it does not hold the run's token: planted?): refusing to start", file)
	var partialSince time.Time
	for {
		if _, err := os.Lstat(file); err == nil {
			got, rerr := readToken(file)
			switch {
			case rerr == nil && subtle.ConstantTimeCompare(got, []byte(token)) == 1:
				_ = os.Remove(file)
				return nil
			case rerr == nil && bytes.HasPrefix([]byte(token), got) && (partialSince.IsZero() || time.Since(partialSince) < partialWait):
				if partialSince.IsZero() {
					partialSince = time.Now() // being written, maybe: look again
				}
			default:
				_ = os.Remove(file)
				return refused
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped while held, before the harness released it: %w", ctx.Err())
		case <-deadline.C:
			if !partialSince.IsZero() {
				return refused
			}
			return fmt.Errorf("not released by the harness within %s (waiting for %s)", timeout, file)
		case <-tick.C:
		}
	}
}

// CreateReleaseFile creates the release file at path, holding token, never
// through a link and never over an existing file (the directory is the
// role's): ReleaseCommand's work.
func CreateReleaseFile(path, token string) error {
	if filepath.Base(path) != File || !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return fmt.Errorf("%s is not an absolute, clean path to a %s file", path, File)
	}
	root, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer root.Close()
	f, err := root.OpenFile(File, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(token); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
