package timeline

import (
	"bytes"
	"os"
	"sort"
	"strings"
)

// Artifact is one entry of the run directory, as listed in the report.
type Artifact struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	// Type is "file", "dir", "symlink" or "other". A symlink or other
	// special file is flagged: the host never writes one there, so it was
	// planted.
	Type string `json:"type"`
}

// maxOutputTail bounds the captured output shown in the report.
const maxOutputTail = 4 << 10

// listArtifacts lists the run directory's top level without following
// anything (ReadDir uses lstat semantics for the entry types).
func (b *builder) listArtifacts() {
	entries, err := os.ReadDir(b.r.dir)
	if err != nil {
		b.r.problem(".", 0, "listing the run directory: %v", err)
		return
	}
	for _, e := range entries {
		if ownOutput(e.Name()) {
			continue // this package's own files: the listing must not depend on a previous write
		}
		a := Artifact{Name: e.Name(), Type: "other"}
		switch {
		case e.Type().IsRegular():
			a.Type = "file"
		case e.IsDir():
			a.Type = "dir"
		case e.Type()&os.ModeSymlink != 0:
			a.Type = "symlink"
		}
		if info, err := e.Info(); err == nil && a.Type == "file" {
			a.Size = info.Size()
		}
		b.t.Artifacts = append(b.t.Artifacts, a)
	}
	sort.Slice(b.t.Artifacts, func(i, j int) bool { return b.t.Artifacts[i].Name < b.t.Artifacts[j].Name })
}

// readOutputs keeps the tail of the captured stdout and stderr.
func (b *builder) readOutputs() {
	b.t.Stdout = tail(b.r.read(FileStdout, false), maxOutputTail)
	b.t.Stderr = tail(b.r.read(FileStderr, false), maxOutputTail)
}

// tail returns the last n bytes of data, starting at a line boundary when
// it had to cut.
func tail(data []byte, n int) string {
	if len(data) <= n {
		return string(data)
	}
	data = data[len(data)-n:]
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		data = data[i+1:]
	}
	return "[… earlier output in the file]\n" + string(bytes.ToValidUTF8(data, []byte("\uFFFD")))
}

// ownOutput reports whether name is one of the files Write produces.
func ownOutput(name string) bool {
	for _, out := range []string{FileTimeline, FileReport} {
		if name == out || (strings.HasPrefix(name, "."+out+".") && strings.HasSuffix(name, ".tmp")) {
			return true
		}
	}
	return false
}
