//go:build unix

package spectrust

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// checkPerm refuses a store directory or file that another user could
// write (see permProblem).
func checkPerm(path string, fi fs.FileInfo) error {
	owner := -1
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		owner = int(st.Uid)
	}
	if p := permProblem(fi.Mode().Perm(), owner, os.Getuid()); p != "" {
		return fmt.Errorf("refusing trust store %s: it %s", path, p)
	}
	return nil
}

// permProblem says what is wrong with a store entry of mode owned by
// owner (-1: unknown) for the user me: writable by group or others, or
// owned by someone other than the user or root (who can write it anyway).
// The threat: whoever can write the store can trust a spec in the user's
// name.
func permProblem(mode fs.FileMode, owner, me int) string {
	switch {
	case mode&0o022 != 0:
		return fmt.Sprintf("is writable by group or others (mode %04o): run chmod go-w on it", mode)
	case owner >= 0 && owner != me && owner != 0:
		return fmt.Sprintf("is owned by uid %d, not by you (uid %d)", owner, me)
	}
	return ""
}
