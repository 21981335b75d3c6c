//go:build linux

package probe

import "os/exec"

// execStart starts path directly (no shell) and returns the command.
func execStart(path string) (*exec.Cmd, error) {
	cmd := exec.Command(path)
	cmd.Env = childEnv()
	err := cmd.Start()
	if err != nil {
		return nil, err
	}
	return cmd, nil
}
