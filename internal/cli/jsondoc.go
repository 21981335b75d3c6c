package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// Schemas of the JSON documents read commands print under --json, each
// described in docs/json.md. A document's "schema" changes its version
// when a field changes meaning or goes away; new fields keep it.
const (
	gcSchema        = "mcpsidecar.gc/v1"
	runsListSchema  = "mcpsidecar.runs/v1"
	runsRmSchema    = "mcpsidecar.runs-rm/v1"
	runsPruneSchema = "mcpsidecar.runs-prune/v1"
	reportSchema    = "mcpsidecar.report/v1"
	versionSchema   = "mcpsidecar.version/v1"
	errorSchema     = "mcpsidecar.error/v1"
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
