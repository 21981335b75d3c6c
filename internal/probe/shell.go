//go:build linux

package probe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// shellPath is the shell the seed's shell paths ran through.
const shellPath = "/bin/sh"

// Timeouts of the seed: shell commands 10 s, alternates 20 s.
const (
	shellTimeout     = 10 * time.Second
	alternateTimeout = 20 * time.Second
	// waitDelay bounds the wait for output after the command ends, so a
	// background child holding the pipe cannot hang the suite.
	waitDelay = 2 * time.Second
)

// Alternate is one bypass attempt of a probe, run through the shell.
type Alternate struct {
	Title         string
	BypassClass   string
	CommandFamily string
	Command       string
}

// noShell is the finding when the image has no shell: there is nothing for
// the shell path to run.
const noShell = "No shell in the image: " + shellPath + " does not exist."

// hasShell reports whether the image has a shell. stat is not governed by
// Landlock, so this sees the image, not the policy.
func hasShell() bool {
	_, err := os.Stat(shellPath)
	return err == nil
}

// runShell runs a seed shell command and classifies it as the seed did:
// exit 0 Allowed, 127 N/A, other exits Denied.
func runShell(ctx context.Context, command string, timeout time.Duration) (Outcome, string) {
	if command == "" {
		return NA, "No shell path is implemented for this capability."
	}
	if !hasShell() {
		return NA, noShell
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, shellPath, "-c", command)
	cmd.WaitDelay = waitDelay
	out, err := cmd.CombinedOutput()
	ev := fmt.Sprintf("output=%s", strings.TrimSpace(string(out)))
	var ee *exec.ExitError
	switch {
	case err == nil:
		return Allowed, ev
	case ctx.Err() != nil:
		return Denied, "timed out"
	case errors.As(err, &ee) && ee.ExitCode() == 127:
		return NA, "command not installed (exit 127); " + ev
	case errors.As(err, &ee):
		return Denied, fmt.Sprintf("returncode=%d; %s", ee.ExitCode(), ev)
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return Denied, "denied by runtime permissions: " + err.Error()
	}
	return Error, err.Error()
}

// shellResult runs the probe's shell path.
func shellResult(ctx context.Context, command string) Result {
	o, ev := runShell(ctx, command, shellTimeout)
	switch o {
	case Allowed:
		return allowed("The shell command succeeded.", ev)
	case Denied:
		return denied("The shell command was denied or failed.", ev)
	case NA:
		return newResult(NA, ev, "")
	}
	return errored("The shell command could not be run.", ev)
}

// runAlternates runs every alternate and aggregates them as the seed did.
func runAlternates(ctx context.Context, alts []Alternate) Alternates {
	if len(alts) == 0 {
		return Alternates{Outcome: NA, Summary: "No alternate shell attempts are implemented for this capability.", Attempts: []Attempt{}}
	}
	res := Alternates{Attempts: make([]Attempt, 0, len(alts))}
	for i, a := range alts {
		o, ev := runShell(ctx, a.Command, alternateTimeout)
		res.Attempts = append(res.Attempts, Attempt{
			ID: fmt.Sprintf("A%02d", i+1), Title: a.Title, Outcome: o,
			BypassClass: a.BypassClass, CommandFamily: a.CommandFamily, Evidence: Redact(ev),
		})
	}
	res.Outcome, res.Summary = aggregate(res.Attempts)
	return res
}

// aggregate is the seed's alternate aggregation rule.
func aggregate(attempts []Attempt) (Outcome, string) {
	if len(attempts) == 0 {
		return NA, "No alternate shell attempts apply to this capability."
	}
	ok, na := 0, 0
	for _, a := range attempts {
		switch a.Outcome {
		case Allowed:
			ok++
		case NA:
			na++
		}
	}
	switch {
	case ok > 0:
		return Allowed, fmt.Sprintf("%d of %d alternate shell attempts succeeded.", ok, len(attempts))
	case na == len(attempts):
		return NA, "No alternate shell command was available."
	}
	return Denied, "No alternate shell attempts succeeded."
}
