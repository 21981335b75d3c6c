//go:build !linux

package probe

// errNote is an error's short form for evidence (waysout_reach.go names
// the errno on Linux, the only place the probe runs).
func errNote(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
