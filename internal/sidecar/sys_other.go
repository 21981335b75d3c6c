//go:build !unix

package sidecar

// fsizeLimit: no file size limit off Unix (the sidecar runs only in the
// sandbox's Linux containers; off Unix this package serves the host its
// record types).
func fsizeLimit() (uint64, bool) { return 0, false }
