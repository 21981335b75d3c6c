//go:build !unix

package caplog

// fsizeLimit: no file size limit off Unix (the roles run only in the
// sandbox's Linux containers; off Unix the host only reads their logs).
func fsizeLimit() (uint64, bool) { return 0, false }
