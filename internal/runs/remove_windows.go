package runs

import (
	"errors"
	"syscall"
)

// errInvalidFunction is ERROR_INVALID_FUNCTION, what wine 8.0 answers to
// the file-disposition call Go's os.RemoveAll deletes with on Windows.
const errInvalidFunction = syscall.Errno(1)

// cannotRemoveByHandle reports whether err says the system cannot delete
// through a handle, so [Remove] falls back to removing name by name.
func cannotRemoveByHandle(err error) bool { return errors.Is(err, errInvalidFunction) }
