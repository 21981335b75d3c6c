package launcher

import "fmt"

// ExitError is a launch that ended with the workload's exit status (or a
// launcher failure with its own code).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return fmt.Sprintf("workload exited with status %d", e.Code)
}

func (e *ExitError) Unwrap() error { return e.Err }

// Exit codes of the launcher itself (the workload's own pass through).
const (
	ExitUsage       = 2 // no policy, no command, a command the policy cannot name
	ExitUnavailable = 5 // a layer the kernel cannot enforce
	ExitLaunch      = 126
)
