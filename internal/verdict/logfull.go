package verdict

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// CheckLogsNotFull is the check that neither the gateway's decision log
// nor the sidecar's audit log filled (or failed) during the run.
const CheckLogsNotFull = "records: decision and audit logs not full"

// logFullLine is the part of a decision or audit line that says the log
// filled: egress.Decision.LogFull (reason) and sidecar.Record.LogFull
// (error), both `log_full`.
type logFullLine struct {
	LogFull bool   `json:"log_full"`
	Reason  string `json:"reason"`
	Error   string `json:"error"`
}

// LogsNotFull checks that the decision log and the audit log of runDir
// did not end full. A role whose log filled (its byte budget, below the
// host's copy cap, or a failed write) wrote one last log_full line and
// refused everything after it; the run then did not do what it was asked,
// and its record is shorter than the run: the threat is a workload that
// fills a log so that what it does next is not recorded (redteam-kube
// finding 1). A line that does not parse fails the check too (a write cut
// short). A log absent from the run fails it when the role that writes
// it ran (expect names those files): a check over a record that is not
// there must not pass; a log whose role the run did not have is skipped.
func LogsNotFull(runDir string, expect ...string) agent.Check {
	c := agent.Check{Name: CheckLogsNotFull}
	var problems, seen []string
	for _, name := range []string{runs.FileDecisions, runs.FileAudit} {
		p, err := logFullProblem(filepath.Join(runDir, name))
		switch {
		case errors.Is(err, errAbsent) && slices.Contains(expect, name):
			problems = append(problems, name+" is missing: its role ran, and its record cannot be shown whole")
			continue
		case errors.Is(err, errAbsent):
			continue
		case err != nil:
			problems = append(problems, err.Error())
		case p != "":
			problems = append(problems, p)
		}
		seen = append(seen, name)
	}
	if len(problems) > 0 {
		c.Detail = strings.Join(problems, "; ")
		return c
	}
	c.OK = true
	c.Detail = "no decision or audit log in the run"
	if len(seen) > 0 {
		c.Detail = "not full: " + strings.Join(seen, ", ")
	}
	return c
}

var errAbsent = errors.New("absent")

// logFullProblem reads the JSON lines at path and says what went wrong:
// its log_full line, or a line that does not parse.
func logFullProblem(path string) (string, error) {
	name := filepath.Base(path)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return "", errAbsent
	}
	b, err := readSmall(path)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var bad string
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l logFullLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			if bad == "" {
				bad = fmt.Sprintf("%s line %d does not parse (a write cut short?): %v", name, n, err)
			}
			continue
		}
		if l.LogFull {
			return fmt.Sprintf("%s ended full at line %d, and its role refused everything after: %s", name, n, l.Reason+l.Error), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading %s: %w", name, err)
	}
	return bad, nil
}
