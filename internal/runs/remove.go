package runs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Remove deletes the run directory at path and everything in it. It
// refuses anything that is not a run directory (a name starting "run-"
// that is a real directory, not a link to one), so a mistyped argument
// cannot delete another tree; links inside are removed, never followed.
func Remove(path string) error {
	if !strings.HasPrefix(filepath.Base(path), "run-") {
		return fmt.Errorf("removing %s: not a run directory (run-...)", path)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("removing %s: not a directory (links are not followed)", path)
	}
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	return nil
}

// inProgressAge is how long a run directory without run-metadata.json is
// taken for a run still going (the harness writes the metadata last).
const inProgressAge = time.Hour

// Prunable splits the runs older than olderThan at now into those to
// delete and those kept back, each kept back one with the reason. A run
// started with --keep is kept back (its containers may still exist: runs
// rm removes both), and so is one that may still be going.
func Prunable(all []Summary, now time.Time, olderThan time.Duration) (prune []Summary, skipped map[string]string) {
	skipped = map[string]string{}
	for _, s := range all {
		age, reason := runAge(s, now)
		switch {
		case reason != "":
			skipped[s.ID] = reason
		case age < olderThan:
		case s.Meta != nil && s.Meta.Kept:
			skipped[s.ID] = "kept with --keep; remove it with: mcpsidecar runs rm " + s.ID
		default:
			prune = append(prune, s)
		}
	}
	return prune, skipped
}

// runAge is how long ago the run finished, or, without metadata, how long
// ago its directory last changed; reason is set when the run may still
// be going.
func runAge(s Summary, now time.Time) (time.Duration, string) {
	if s.Meta != nil {
		return now.Sub(s.Meta.Finished), ""
	}
	fi, err := os.Lstat(s.Path)
	if err != nil {
		return 0, fmt.Sprintf("unreadable: %v", errors.Unwrap(err))
	}
	age := now.Sub(fi.ModTime())
	if age < inProgressAge {
		return age, "no run-metadata.json yet: the run may still be going"
	}
	return age, ""
}
