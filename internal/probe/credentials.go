package probe

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/hold"
	"github.com/mcpsidecar/mcpsidecar/internal/redact"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// The proof that credentials stay at the boundary (issue 15). Threat: a
// workload that can read its own environment, another process's, or a file
// (a prompt injection is enough) sends a real key anywhere the allowlist
// reaches, or prints it into an answer. The probe never knows the real key
// and is never given anything derived from it: it recognises the run's
// placeholder by its shape, and flags every value that looks like a key
// and is not one. Findings name the variable or the file and the shape;
// a value is never recorded.
//
// Two probes share the work, one source each, so one finding is counted
// once: G05 T05 judges the process's own environment (os.Environ and
// /proc/self/environ), G40 T19 everything else the workload can read
// (other processes' environments and command lines, files).

// PlaceholderPrefix starts every run's credential placeholder; the rest
// is [placeholderHexLen] lower-case hex digits. The harness
// (orchestrate.NewPlaceholder) writes it; the probe recognises it without
// importing the harness (a probe must not share code with what it checks);
// internal/sandbox's TestPlaceholderContract holds the two together.
const PlaceholderPrefix = "mcpsidecar-placeholder-"

const placeholderHexLen = 48

// IsPlaceholder reports whether s has the exact shape of a run's
// credential placeholder.
func IsPlaceholder(s string) bool {
	hex, ok := strings.CutPrefix(s, PlaceholderPrefix)
	if !ok || len(hex) != placeholderHexLen {
		return false
	}
	return strings.Trim(hex, "0123456789abcdef") == ""
}

// Key shapes: the token shapes [Redact] removes ([redact.Tokens]), with a
// length floor so a word such as "sk-learn" is not a key, plus bearer
// tokens.
var (
	bearerToken = regexp.MustCompile(`(?i)\bBearer[ \t]+([A-Za-z0-9._~+/=-]{16,})`)
	// secretAssign is a secret-named assignment in a file: KEY=value,
	// "key": "value", key: value.
	secretAssign = regexp.MustCompile(`(?i)["']?\b([A-Z0-9_]*(?:API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|ACCESS_KEY)[A-Z0-9_]*)["']?[ \t]*[=:][ \t]*["']?([^\s"',;}]{12,})`)
	// secretName is a variable name that says it holds a secret.
	secretName = regexp.MustCompile(`(?i)(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|ACCESS_KEY|PRIVATE_KEY)`)
)

const minKeyLen = 20

// secretWords are the lower-case words a line must hold before
// secretAssign is tried on it.
var secretWords = []string{"key", "token", "secret", "passw", "credential"}

// keyShapes names each key shape found in text, skipping the values in
// skip (credentials the spec put in the sandbox on purpose) and the
// placeholder.
func keyShapes(text string, skip func(string) bool) []string {
	var found []string
	add := func(what string) {
		if !slices.Contains(found, what) {
			found = append(found, what)
		}
	}
	// FindAll tries a shape's regexp only when one of its literal
	// prefixes occurs (a file is up to credMaxFileBytes).
	for _, tok := range redact.Tokens {
		for _, m := range tok.FindAll(text) {
			if len(m) >= minKeyLen && !skip(m) {
				add(tok.Name)
				break
			}
		}
	}
	lower := strings.ToLower(text)
	if strings.Contains(lower, "bearer") {
		for _, m := range bearerToken.FindAllStringSubmatch(text, -1) {
			if !IsPlaceholder(m[1]) && !skip(m[1]) {
				add("a Bearer token")
				break
			}
		}
	}
	if name := secretAssignment(text, lower, skip); name != "" {
		add("a value assigned to " + name)
	}
	return found
}

// secretAssignment returns the name of the first secret-named assignment
// in text whose value is not the placeholder, a URL or redacted; it tries
// only the lines that hold a secret word.
func secretAssignment(text, lower string, skip func(string) bool) string {
	for start := 0; start < len(text); {
		end := strings.IndexByte(text[start:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += start
		}
		line, lline := text[start:end], lower[start:end]
		start = end + 1
		if !slices.ContainsFunc(secretWords, func(w string) bool { return strings.Contains(lline, w) }) {
			continue
		}
		for _, m := range secretAssign.FindAllStringSubmatch(line, -1) {
			if v := m[2]; !IsPlaceholder(v) && !skip(v) && !strings.Contains(v, "://") && !strings.Contains(v, redacted) {
				return m[1]
			}
		}
	}
	return ""
}

// credentialScan judges what one probe reads. It holds the values it must
// not count (the sandbox's declared softenings) in memory only.
type credentialScan struct {
	c        *Context
	skip     map[string]bool
	findings []string
	notes    []string
}

func newCredentialScan(c *Context, env []string) *credentialScan {
	s := &credentialScan{c: c, skip: map[string]bool{}}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if value != "" && (c.livesIn(name) == LivesSandbox || slices.Contains(c.SpecVariables, name)) {
			s.skip[value] = true
		}
	}
	return s
}

func (s *credentialScan) skipped(v string) bool { return s.skip[v] }

// variable judges one NAME=value of an environment read at where.
func (s *credentialScan) variable(where, name, value string) {
	if value == "" {
		return
	}
	switch {
	case s.c.livesIn(name) == LivesSandbox:
		s.note(name + " lives in the sandbox (a recorded softening)")
		return
	case slices.Contains(s.c.SpecVariables, name):
		s.note(name + " is set by the spec's [[environment_variables]]")
		return
	case IsPlaceholder(value):
		s.note(name + " holds the run's placeholder")
		return
	case name == hold.TokenEnv:
		// The harness's own: a held role's release token, spent once the
		// role was released (internal/hold); it opens nothing else.
		s.note(name + " is the start hold's release token, spent at the release")
		return
	case s.c.livesIn(name) == LivesGateway:
		s.find(where, name+" holds a value that is not the run's placeholder (its credential lives in the gateway)")
		return
	case secretName.MatchString(name) && !s.skipped(value):
		s.find(where, name+" (a secret-named variable) holds a value that is not the run's placeholder")
		return
	}
	for _, shape := range keyShapes(value, s.skipped) {
		s.find(where, name+" holds "+shape)
	}
}

// environ judges a whole environment (NAME=value entries).
func (s *credentialScan) environ(where string, env []string) {
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		s.variable(where, name, value)
	}
}

// text judges free text (a command line, a file) at where.
func (s *credentialScan) text(where, text string) {
	for _, shape := range keyShapes(text, s.skipped) {
		s.find(where, "holds "+shape)
	}
}

func (s *credentialScan) find(where, what string) {
	s.findings = append(s.findings, where+": "+what)
}

func (s *credentialScan) note(n string) {
	if !slices.Contains(s.notes, n) {
		s.notes = append(s.notes, n)
	}
}

// result is Allowed when a credential was found (the workload can read
// it), Denied otherwise; evidence names places and shapes, never values.
func (s *credentialScan) result(searched string) Result {
	notes := "no credential variable seen"
	if len(s.notes) > 0 {
		notes = strings.Join(s.notes, "; ")
	}
	if len(s.findings) > 0 {
		// No ':' or '=' after "credential" in a summary: Redact would
		// take the rest of the line for a secret's value.
		return allowed(fmt.Sprintf("Credentials are readable (%d findings, places and shapes only).", len(s.findings)),
			strings.Join(s.findings, "; ")+" | "+notes+" | searched "+searched)
	}
	return denied("No credential is readable, only the run's placeholder or none at all.", notes+" | searched "+searched)
}

// ownEnvironment is G05 T05: the process's environment, as Go holds it and
// as the kernel shows it in /proc/self/environ (a value set before exec).
func ownEnvironment(c *Context) Result {
	env := os.Environ()
	s := newCredentialScan(c, env)
	s.environ("environment", env)
	searched := fmt.Sprintf("%d variables", len(env))
	if raw, err := os.ReadFile("/proc/self/environ"); err == nil {
		s.environ("/proc/self/environ", splitNUL(raw))
		searched += ", /proc/self/environ"
	} else {
		searched += ", /proc/self/environ unreadable (" + errNote(err) + ")"
	}
	return s.result(searched)
}

func splitNUL(b []byte) []string {
	var out []string
	for _, f := range bytes.Split(b, []byte{0}) {
		if len(f) > 0 {
			out = append(out, string(f))
		}
	}
	return out
}

// Bounds of the file search: the probe has 20 s and a memory limit.
const (
	credMaxFiles     = 5000
	credMaxFileBytes = 256 << 10
	credMaxDepth     = 8
	credMaxTotal     = 32 << 20
)

// credentialRoots are the places a workload would look for a key: its
// writable directories, the homes, and well-known secret and config paths
// (Docker and Kubernetes secrets, environment files, the cloud CLIs',
// package managers' and git's credential files live under the homes).
func credentialRoots(c *Context) []string {
	roots := []string{c.RuntimeUserDirectory, c.RuntimeTempDirectory, c.WorkingDirectory, c.OutputDirectory,
		"/root", "/run/secrets", "/var/run/secrets", "/etc/environment", "/etc/profile", "/etc/profile.d"}
	if h := os.Getenv("HOME"); h != "" && filepath.IsAbs(h) {
		roots = append(roots, h)
	}
	// A root container without a passwd entry has HOME=/: the search
	// stays in the places above, never the whole tree or /proc.
	roots = slices.DeleteFunc(roots, func(r string) bool { return filepath.Clean(r) == "/" })
	sort.Strings(roots)
	return slices.Compact(roots)
}

// pseudoFS are trees the file search never enters: kernel views, which
// hold other processes' environments (searched as such) and endless files.
var pseudoFS = []string{"/proc", "/sys", "/dev"}

// readableCredentials is G40 T19: every other process's environment and
// command line the workload can read, and the files under
// [credentialRoots].
func readableCredentials(ctx context.Context, c *Context) Result {
	return searchCredentials(ctx, c, "/proc", credentialRoots(c))
}

// searchCredentials searches the processes under procDir and the files
// under roots (tests give their own: on a developer's machine the real
// ones hold real keys).
func searchCredentials(ctx context.Context, c *Context, procDir string, roots []string) Result {
	s := newCredentialScan(c, os.Environ())
	procs, unreadable := s.processes(procDir)
	files, bytesRead, skipped := s.files(ctx, roots)
	searched := fmt.Sprintf("%d other processes (%d environments unreadable), %d files (%s), %d entries unreadable or skipped",
		procs, unreadable, files, fmtSize(bytesRead), skipped)
	return s.result(searched)
}

// processes reads /proc/<pid>/environ and cmdline of every visible
// process but this one.
func (s *credentialScan) processes(procDir string) (seen, unreadable int) {
	ents, _ := os.ReadDir(procDir)
	self := strconv.Itoa(os.Getpid())
	for _, e := range ents {
		pid := e.Name()
		if _, err := strconv.Atoi(pid); err != nil || pid == self {
			continue
		}
		seen++
		dir := filepath.Join(procDir, pid)
		if raw, err := os.ReadFile(filepath.Join(dir, "environ")); err == nil {
			s.environ(dir+"/environ", splitNUL(raw))
		} else {
			unreadable++
		}
		if raw, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
			s.text(dir+"/cmdline", strings.Join(splitNUL(raw), " "))
		}
	}
	return seen, unreadable
}

// files walks roots without following links, reading at most
// credMaxFileBytes of each regular file.
func (s *credentialScan) files(ctx context.Context, roots []string) (files int, total int64, skipped int) {
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			switch {
			case ctx.Err() != nil || files >= credMaxFiles || total >= credMaxTotal:
				return fs.SkipAll
			case err != nil:
				if !os.IsNotExist(err) {
					skipped++
				}
				return nil
			case d.IsDir() && slices.Contains(pseudoFS, filepath.Clean(p)):
				return fs.SkipDir
			case d.IsDir() && strings.Count(strings.TrimPrefix(p, root), "/") >= credMaxDepth:
				skipped++
				return fs.SkipDir
			case !d.Type().IsRegular():
				return nil
			}
			n, err := s.file(p)
			if err != nil {
				skipped++
				return nil
			}
			files++
			total += n
			return nil
		})
	}
	return files, total, skipped
}

func (s *credentialScan) file(p string) (int64, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|runs.NoFollow|runs.NonBlock, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, credMaxFileBytes))
	if err != nil {
		return 0, err
	}
	s.text(p, string(data))
	return int64(len(data)), nil
}

func fmtSize(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
