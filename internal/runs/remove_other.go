//go:build !windows

package runs

// cannotRemoveByHandle is false off Windows: os.RemoveAll removes through
// directory descriptors (unlinkat, never following a link), and Remove
// keeps it.
func cannotRemoveByHandle(error) bool { return false }
