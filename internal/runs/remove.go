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
// Where the system cannot delete through a handle (wine 8.0 answers Go's
// os.RemoveAll on Windows with "Invalid function"), it removes the tree
// name by name instead ([removeByName]).
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
	err = os.RemoveAll(path)
	if err != nil && cannotRemoveByHandle(err) {
		err = removeByName(path)
	}
	if err != nil {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	return nil
}

// removeByName removes the tree at path entry by entry with os.Remove,
// deepest first. It never follows a link: each entry is looked at with
// Lstat, and only a real directory is entered; a symbolic link, or a
// junction on Windows (neither is a directory to Lstat), is removed as
// itself. A read-only entry (Windows keeps a secured run directory's files
// so) is made writable first. Unlike os.RemoveAll on Linux it walks by
// path, so a directory swapped for a link while it runs could be entered:
// it is only the fallback where the handle-relative removal is missing,
// and a run directory is removed once its containers are gone.
func removeByName(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := removeByName(filepath.Join(path, e.Name())); err != nil {
				return err
			}
		}
	}
	err = os.Remove(path)
	if err != nil && fi.Mode()&0o200 == 0 && (fi.IsDir() || fi.Mode().IsRegular()) {
		if cerr := os.Chmod(path, fi.Mode().Perm()|0o200); cerr != nil {
			return errors.Join(err, cerr)
		}
		err = os.Remove(path)
	}
	return err
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
