package verdict

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/agent"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// RunCheck is the verdict of an agent run, one row per condition.
type RunCheck struct {
	OK     bool          `json:"ok"`
	Checks []agent.Check `json:"checks"`
}

// Names of the [RunCheck] rows.
const (
	CheckAgentExit     = "agent exit code"
	CheckAnswerStdout  = "answer.txt equals stdout"
	CheckAuditComplete = "audit: every agent tool call audited"
	CheckFormatRead    = "audit: answer format read"
	CheckSampleSearch  = "audit: " + agent.ToolCodeSampleSearch + " called"
)

// CheckRun is the verdict of the run in runDir. For any question: the
// agent exited 0, answer.txt equals stdout.txt (up to one trailing
// newline) and is not empty, and every tool call the agent recorded with a
// correlation id has its line in the sidecar's audit log. For the seed's
// task (question "" or [agent.DefaultQuestion]) also the seed's definition of
// success: the audit log holds a successful read of the answer format and
// a successful code-sample search. The agent's exit code comes from
// run-metadata.json (containers[role=agent]); a harness that writes the
// metadata after the verdict uses [CheckRunExit] instead.
func CheckRun(runDir, question string) RunCheck {
	code, err := agentExitCode(filepath.Join(runDir, runs.MetadataFile))
	if err != nil {
		return verdict(agent.Check{Name: CheckAgentExit, Detail: err.Error()}, runDir, question)
	}
	return CheckRunExit(runDir, code, question)
}

// CheckRunExit is [CheckRun] with the agent's exit code given.
func CheckRunExit(runDir string, agentExit int, question string) RunCheck {
	return verdict(agent.Check{Name: CheckAgentExit, OK: agentExit == 0, Detail: fmt.Sprintf("want 0, got %d", agentExit)}, runDir, question)
}

func verdict(exit agent.Check, runDir, question string) RunCheck {
	checks := []agent.Check{exit, checkAnswerStdout(runDir)}
	lines, auditErr := readAudit(filepath.Join(runDir, runs.FileAudit))
	checks = append(checks, checkAuditComplete(filepath.Join(runDir, runs.FileAgentTurns), lines, auditErr))
	if question == "" || question == agent.DefaultQuestion {
		checks = append(checks, checkSeedTask(lines, auditErr)...)
	}
	rc := RunCheck{OK: true, Checks: checks}
	for _, c := range checks {
		rc.OK = rc.OK && c.OK
	}
	return rc
}

// agentExitCode reads containers[role=agent].exit_code from run-metadata.json.
func agentExitCode(path string) (int, error) {
	b, err := readSmall(path)
	if err != nil {
		return 0, err
	}
	var md runs.Metadata
	if err := json.Unmarshal(b, &md); err != nil {
		return 0, fmt.Errorf("decoding %s: %w", filepath.Base(path), err)
	}
	for _, c := range md.Containers {
		if c.Role == roleAgent && c.ExitCode != nil {
			return *c.ExitCode, nil
		}
	}
	return 0, fmt.Errorf("%s has no agent container with an exit code", filepath.Base(path))
}

// checkAnswerStdout compares answer.txt with stdout.txt.
func checkAnswerStdout(runDir string) agent.Check {
	c := agent.Check{Name: CheckAnswerStdout}
	answer, err := readSmall(filepath.Join(runDir, runs.FileAnswer))
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	out, err := readSmall(filepath.Join(runDir, runs.FileStdout))
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	trim := func(b []byte) []byte { return bytes.TrimSuffix(b, []byte("\n")) }
	switch {
	case len(bytes.TrimSpace(answer)) == 0:
		c.Detail = "answer.txt is empty"
	case !bytes.Equal(trim(answer), trim(out)):
		c.Detail = fmt.Sprintf("answer.txt (%d bytes) differs from stdout.txt (%d bytes)", len(answer), len(out))
	default:
		c.OK, c.Detail = true, fmt.Sprintf("%d bytes", len(answer))
	}
	return c
}

// auditLine is the part of a sidecar audit line the verdict needs.
type auditLine struct {
	Kind          string `json:"kind"`
	Name          string `json:"name"`
	OK            bool   `json:"ok"`
	CorrelationID string `json:"correlation_id"`
}

// checkAuditComplete: each tool call the agent sent to the sidecar (a
// tool_call turn with a correlation id) has an audit end line with that
// id, and every call the audit shows started has its end line.
func checkAuditComplete(turnsPath string, lines []auditLine, auditErr error) agent.Check {
	c := agent.Check{Name: CheckAuditComplete}
	if auditErr != nil {
		c.Detail = auditErr.Error()
		return c
	}
	ids, err := calledIDs(turnsPath)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	// Only end lines count: a call_start alone is a call the sidecar
	// never finished recording.
	audited, started := map[string]bool{}, map[string]bool{}
	for _, l := range lines {
		if l.Kind == auditKindCallStart {
			started[l.CorrelationID] = true
			continue
		}
		audited[l.CorrelationID] = true
	}
	var unended []string
	for id := range started {
		if !audited[id] {
			unended = append(unended, id)
		}
	}
	if len(unended) > 0 {
		slices.Sort(unended)
		c.Detail = (Calls{Unended: unended}).UnendedDetail()
		return c
	}
	var missing []string
	for _, id := range ids {
		if !audited[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		c.Detail = fmt.Sprintf("%d of %d calls have no audit line (correlation ids %s)", len(missing), len(ids), strings.Join(missing, ", "))
		return c
	}
	c.OK, c.Detail = true, fmt.Sprintf("%d calls, %d audit lines", len(ids), len(lines))
	return c
}

// calledIDs reads the correlation ids of the agent's sidecar calls.
func calledIDs(path string) ([]string, error) {
	b, err := readSmall(path)
	if err != nil {
		return nil, err
	}
	var ids []string
	for n, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var tr agent.Turn
		if err := json.Unmarshal(line, &tr); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", filepath.Base(path), n+1, err)
		}
		if tr.Kind == agent.KindToolCall && tr.CorrelationID != "" {
			ids = append(ids, tr.CorrelationID)
		}
	}
	return ids, nil
}

// checkSeedTask looks for the successful format read and code-sample search.
func checkSeedTask(lines []auditLine, auditErr error) []agent.Check {
	read := agent.Check{Name: CheckFormatRead, Detail: "no successful resources/read of " + agent.AnswerFormatURI}
	search := agent.Check{Name: CheckSampleSearch, Detail: "no successful tools/call of " + agent.ToolCodeSampleSearch}
	if auditErr != nil {
		read.Detail, search.Detail = auditErr.Error(), auditErr.Error()
		return []agent.Check{read, search}
	}
	for _, l := range lines {
		switch {
		case l.OK && l.Kind == "resources/read" && l.Name == agent.AnswerFormatURI:
			read.OK, read.Detail = true, "resources/read "+agent.AnswerFormatURI
		case l.OK && l.Kind == "tools/call" && l.Name == agent.ToolCodeSampleSearch:
			search.OK, search.Detail = true, "tools/call "+agent.ToolCodeSampleSearch
		}
	}
	return []agent.Check{read, search}
}

func readAudit(path string) ([]auditLine, error) { return readLines[auditLine](path) }

// readLines reads the JSON lines of a small file (blank lines skipped),
// naming the file and line of the first that does not parse.
func readLines[T any](path string) ([]T, error) {
	b, err := readSmall(path)
	if err != nil {
		return nil, err
	}
	var out []T
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l T
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", filepath.Base(path), n, err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// maxArtifact bounds what the verdict reads of a workload-written file.
const maxArtifact = 64 << 20

// readSmall reads a regular file, never through a link the workload
// could have planted (O_NOFOLLOW, then fstat on the open file, so the
// check and the read see the same file), and refuses one over maxArtifact.
func readSmall(path string) ([]byte, error) {
	name := filepath.Base(path)
	f, err := os.OpenFile(path, os.O_RDONLY|runs.NoFollow|runs.NonBlock, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s is missing", name)
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s (a link is refused): %w", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxArtifact+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(b) > maxArtifact {
		return nil, fmt.Errorf("%s is over %d bytes", name, maxArtifact)
	}
	return b, nil
}
