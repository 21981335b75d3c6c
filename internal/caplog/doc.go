// Package caplog is the size-capped JSON-lines log both the gateway's
// decision log (internal/egress) and the sidecar's audit log
// (internal/sidecar) write through: one line per Write call under a
// mutex, a byte budget, and one last log-full line when a line would pass
// the budget or a write fails, after which every line is refused.
//
// The threat it answers: a workload that fills a role's log (with denied
// requests, with tool calls) until lines can no longer be written, and
// then does what the record does not show (red team, finding 1). A role
// whose log is full refuses all work instead; the host's verdict
// (internal/verdict) reads the log-full line.
//
// It keeps [Headroom] free under the budget's hard limit for that last
// line, and lowers the budget to the process's RLIMIT_FSIZE minus the
// headroom at the first write to a file it opened (a role sets its limits
// after it opened its log), so the file ends with a whole marker line
// instead of a line cut by EFBIG.
//
// It knows nothing of what the lines hold: the roles marshal their own
// records and build their own marker. It imports only the standard
// library.
package caplog
