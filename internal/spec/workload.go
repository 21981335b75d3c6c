package spec

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// Bring your own workload: the optional [workload] table names the image
// and command the sandbox runs instead of the built-in agent. The threats
// each rule answers: an image reference Docker would read differently from
// how it was written (a name with whitespace or upper case is rejected by
// the engine only at run time, after the network and the sidecar exist), a
// command the launcher could not name as the one file allowed to execute
// (a relative path resolves against a directory the workload chooses), and
// a misspelt key silently ignored (a workload running somewhere other than
// intended).

// Spec keys of [workload].
const (
	keyWorkload        = "workload"
	keyWorkloadImage   = "image"
	keyWorkloadCommand = "command"
)

var workloadKeys = []string{keyWorkloadCommand, keyWorkloadImage}

// Workload is the [workload] table: the image the sandbox runs and the
// command in it (empty: the image's own entrypoint and command).
type Workload struct {
	Image   string   `json:"image"`
	Command []string `json:"command,omitempty"`
}

// maxCommandArgs and maxArgBytes bound a command: it goes in an
// environment variable and an execve argument vector.
const (
	maxCommandArgs = 256
	maxArgBytes    = 4096
)

// imageRefRE is a Docker image reference: an optional registry host (with
// port), lower-case path components, an optional tag, an optional digest;
// or a bare image ID "sha256:<64 hex>". It follows the grammar of
// github.com/distribution/reference.
var imageRefRE = regexp.MustCompile(`^(?:` +
	`(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?/)?` +
	`[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*` +
	`(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?` +
	`(?:@sha256:[0-9a-f]{64})?` +
	`|sha256:[0-9a-f]{64})$`)

// CheckImageRef reports whether ref is an image reference the engine will
// read as written.
func CheckImageRef(ref string) error {
	switch {
	case ref == "":
		return fmt.Errorf("empty image reference")
	case len(ref) > 255:
		return fmt.Errorf("image reference is longer than 255 characters")
	case !imageRefRE.MatchString(ref):
		return fmt.Errorf("invalid image reference %q: write [registry/]name[:tag][@sha256:digest] with a lower-case name, e.g. \"python:3.12-slim\"", ref)
	}
	return nil
}

// CheckCommand reports whether argv can be the workload's command: at
// least the program, which is an absolute path or a bare name (looked up in
// the image's PATH by the launcher), no NUL byte anywhere.
func CheckCommand(argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("empty command: give at least the program, e.g. [\"python3\", \"/app/agent.py\"]")
	}
	if len(argv) > maxCommandArgs {
		return fmt.Errorf("command has %d arguments, more than %d", len(argv), maxCommandArgs)
	}
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("argument %d contains a NUL byte", i)
		}
		if len(a) > maxArgBytes {
			return fmt.Errorf("argument %d is longer than %d bytes", i, maxArgBytes)
		}
	}
	prog := argv[0]
	switch {
	case prog == "":
		return fmt.Errorf("empty program name (the first element of command)")
	case strings.Contains(prog, "/") && !strings.HasPrefix(prog, "/"):
		return fmt.Errorf("program %q is a relative path: give an absolute path or a bare name looked up in the image's PATH", prog)
	}
	return nil
}

// workloadEntry is the [workload] table as written.
type workloadEntry struct {
	at      pos
	image   *item
	command []item
	cmdAt   *pos
	// badKey is set when a key of the table was reported: a missing
	// image is then most likely that key, and not reported twice.
	badKey bool
}

// workloadTable starts the [workload] table; the caller has reset the
// other tables' state. It reports whether parts names it.
func (w *walker) workloadTable(parts []string, at pos) bool {
	if len(parts) == 0 || parts[0] != keyWorkload {
		return false
	}
	if len(parts) > 1 {
		w.add(at, joinKey(parts), "unknown table; [workload] has no sub-tables (its keys: %s)", strings.Join(workloadKeys, ", "))
		return true
	}
	w.seen[keyWorkload] = at
	w.work = &workloadEntry{at: at}
	w.inWork, w.inOther = true, false
	return true
}

// workloadArrayTable reports [[workload]], which is one table.
func (w *walker) workloadArrayTable(key string, at pos) bool {
	if key != keyWorkload {
		return false
	}
	w.add(at, key, "must be one table: write [workload]")
	return true
}

// workloadTopKey reports workload = ... written as a top-level key.
func (w *walker) workloadTopKey(parts []string, at pos) bool {
	if len(parts) == 0 || parts[0] != keyWorkload {
		return false
	}
	w.add(at, joinKey(parts), "write the workload as a [workload] table with image and command")
	return true
}

func (w *walker) workloadKey(parts []string, at pos, v *unstable.Node) {
	e := w.work
	key := joinKey(parts)
	path := keyWorkload + "." + key
	if len(parts) != 1 {
		w.add(at, path, "unknown key; supported keys: %s", strings.Join(workloadKeys, ", "))
		e.badKey = true
		return
	}
	if !w.known(key, at, path, workloadKeys) {
		e.badKey = true
		return
	}
	vat := w.pos(v, at)
	switch key {
	case keyWorkloadImage:
		if v.Kind != unstable.String {
			w.add(vat, path, "must be a string, not %s", kindName(v))
			e.badKey = true
			return
		}
		e.image = &item{string(v.Data), vat, path}
	case keyWorkloadCommand:
		if v.Kind != unstable.Array {
			w.add(vat, path, "must be an array of strings (the program and its arguments), not %s", kindName(v))
			e.badKey = true
			return
		}
		list := w.stringList(path, at, v)
		if len(list) != countElems(v) {
			e.badKey = true
			return // a non-string, already reported
		}
		e.command, e.cmdAt = list, &vat
	}
}

func countElems(v *unstable.Node) int {
	n := 0
	for it := v.Children(); it.Next(); {
		if it.Node().Kind != unstable.Comment {
			n++
		}
	}
	return n
}

// checkWorkload validates the [workload] table and copies it into the
// spec.
func (w *walker) checkWorkload() {
	e := w.work
	if e == nil {
		return
	}
	ok := true
	if e.image == nil && !e.badKey {
		w.add(e.at, keyWorkload, "missing image: [workload] names the image to run (and optionally its command)")
		ok = false
	} else if e.image == nil {
		ok = false
	} else if err := CheckImageRef(e.image.val); err != nil {
		w.add(e.image.at, e.image.path, "%v", err)
		ok = false
	}
	var argv []string
	if e.cmdAt != nil {
		argv = values(e.command)
		if err := CheckCommand(argv); err != nil {
			w.add(*e.cmdAt, keyWorkload+"."+keyWorkloadCommand, "%v", err)
			ok = false
		}
	}
	if ok {
		w.spec.Workload = &Workload{Image: e.image.val, Command: argv}
	}
}
