package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/spf13/cobra"
)

// Schemas of the JSON documents read commands print under --json, each
// described in docs/json.md. A document's "schema" changes its version
// when a field changes meaning or goes away; new fields keep it.
const (
	gcSchema         = "mcpsidecar.gc/v1"
	runsListSchema   = "mcpsidecar.runs/v1"
	runsShowSchema   = "mcpsidecar.runs-show/v1"
	runsRmSchema     = "mcpsidecar.runs-rm/v1"
	runsPruneSchema  = "mcpsidecar.runs-prune/v1"
	reportSchema     = "mcpsidecar.report/v1"
	reportDiffSchema = "mcpsidecar.report-diff/v1"
	versionSchema    = "mcpsidecar.version/v1"
	runSummarySchema = "mcpsidecar.run-summary/v1"
	errorSchema      = "mcpsidecar.error/v1"
)

// writeJSONDoc writes v, which must encode as a JSON object, as one
// indented document whose first field is "schema".
func writeJSONDoc(w io.Writer, schema string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", schema, err)
	}
	if len(body) < 2 || body[0] != '{' {
		return fmt.Errorf("encoding %s: not an object", schema)
	}
	head, _ := json.Marshal(map[string]string{"schema": schema})
	doc := append(head[:len(head)-1:len(head)-1], body[1:]...)
	if len(body) > 2 {
		doc = append(head[:len(head)-1:len(head)-1], append([]byte{','}, body[1:]...)...)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, doc, "", "  "); err != nil {
		return fmt.Errorf("encoding %s: %w", schema, err)
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// jsonError is the document a failing command prints on stdout under
// --json, so a script always reads one JSON document.
type jsonError struct {
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
	Hint     string `json:"hint,omitempty"`
}

// runDoc is one run as `runs list --json` and `runs show --json` show it:
// the same shape in both.
type runDoc struct {
	ID   string `json:"id"`
	Path string `json:"path"`
	// Metadata is run-metadata.json, null when it is missing or
	// unreadable (a run still going, or one killed), and Error says why.
	Metadata *runs.Metadata `json:"metadata"`
	Error    string         `json:"error,omitempty"`
}

func newRunDoc(s runs.Summary) runDoc {
	d := runDoc{ID: s.ID, Path: s.Path}
	if s.MetaErr != nil {
		d.Error = s.MetaErr.Error()
	}
	if s.Meta != nil {
		m := *s.Meta // arrays are [] in our documents, whatever the file held
		m.Networks, m.Containers, m.Phases = nonNil(m.Networks), nonNil(m.Containers), nonNil(m.Phases)
		m.Degradations, m.Verdict.Checks = nonNil(m.Degradations), nonNil(m.Verdict.Checks)
		m.Containers = slices.Clone(m.Containers)
		for i := range m.Containers {
			m.Containers[i].Networks, m.Containers[i].Aliases = nonNil(m.Containers[i].Networks), nonNil(m.Containers[i].Aliases)
		}
		d.Metadata = &m
	}
	return d
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// countingWriter remembers whether anything was written through it.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}

// wantsJSON reports whether cmd was run with --json.
func wantsJSON(cmd *cobra.Command) bool {
	if cmd == nil {
		return false
	}
	f := cmd.Flags().Lookup("json")
	return f != nil && f.Value.String() == "true"
}
