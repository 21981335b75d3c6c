package spec

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one thing wrong with a spec, where it is and which key.
type Problem struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"` // 1-based; 0 when the whole file is at fault
	Col     int    `json:"col,omitempty"`
	Key     string `json:"key,omitempty"` // key path, e.g. "environment_variables[1].name"
	Message string `json:"message"`
}

// String is "file:line:col: key: message".
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", p.Line, p.Col)
	}
	b.WriteString(": ")
	if p.Key != "" {
		b.WriteString(p.Key + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Problems is the error of an invalid spec: every problem found, sorted
// by position. The cli maps it to exit code 3.
type Problems struct {
	List []Problem
}

// Error lists every problem, one per line.
func (e *Problems) Error() string {
	lines := make([]string, len(e.List))
	for i, p := range e.List {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

func (e *Problems) sort() {
	sort.SliceStable(e.List, func(i, j int) bool {
		a, b := e.List[i], e.List[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		return a.Message < b.Message
	})
}

// errOrNil returns e as an error when it holds problems.
func (e *Problems) errOrNil() error {
	if len(e.List) == 0 {
		return nil
	}
	e.sort()
	return e
}
