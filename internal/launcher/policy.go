// Package launcher runs a user's workload (any image, any command) under
// the same in-process hardening our own roles apply to themselves. The
// static mcpsidecar binary is mounted read-only into the workload's
// container and is its entrypoint (the hidden role `launch`); it resolves
// the command in the image, derives the workload's Landlock rules from the
// role policy the harness hands it ([Plan]), applies them and the seccomp
// filter with package harden, and only then executes the command.
//
// The rules: the image's tree is read-only; /tmp, /sandbox-work and the
// output directory are read-write and never executable; TCP connects go
// only to the ports in the policy (the sidecar's and the gateway's).
// Without shell_access the only files the workload may execute are its own
// program and what the kernel must open to start it (the ELF interpreter
// named in the program, a script's interpreter); a supervisor refuses every
// execve after the first, so not even those can start again. With
// shell_access anything in the image's read-only tree may run, never a file
// the workload wrote. Before anything runs, every writable directory must
// be on a noexec mount (statfs), and every mount the workload can write
// through (from /proc/self/mountinfo: the one holding each writable path
// and every one at or below it, such as an image VOLUME) noexec, nosuid
// and nodev: Landlock's execute right does not see mmap, so only the
// mount keeps a library the workload writes from being mapped executable
// (internal/noexec makes the output directory so).
package launcher

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
)

// Role is the harden role name of a workload.
const Role = "workload"

// Environment the harness sets for the launcher.
const (
	// EnvShellAccess is "1" when the spec grants shell_access.
	EnvShellAccess = "MCPSIDECAR_LAUNCH_SHELL_ACCESS"
	// EnvSelf is the launcher's own path in the container, which the
	// workload may neither read nor execute.
	EnvSelf = "MCPSIDECAR_LAUNCH_SELF"
	// EnvStage marks the launcher's second stage (its value: the
	// descriptor of the supervisor's socket); the harness sets it empty.
	EnvStage = "MCPSIDECAR_LAUNCH_STAGE"
	// EnvExecAccepted names the writable path the user accepted as not
	// noexec (the harness's MCPSIDECAR_ALLOW_EXEC_OUTPUT, when the host
	// could not make the mount); the harness sets it empty otherwise.
	EnvExecAccepted = "MCPSIDECAR_LAUNCH_EXEC_ACCEPTED"
)

// DefaultPath is the search path for a bare program name when the
// workload's environment sets none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// hiddenInImage are parts of an image's tree never granted, not even for
// reading: the package databases, which list every installed program and
// version (an inventory for an attacker, probe G19 T02) and which no
// workload needs at run time.
var hiddenInImage = []string{"/var/lib/dpkg", "/var/lib/apt", "/var/lib/rpm", "/var/lib/dnf", "/lib/apk/db", "/var/cache/apt"}

// notImage are the top-level directories that are not the image's tree:
// kernel interfaces (granted file by file, or read-only like /proc, by
// the role policy) and the writable mounts.
var notImage = []string{"/dev", "/proc", "/sys"}

// Input is what [Plan] needs: the role policy the harness compiled from
// the spec (the agent's, with no_spawn), the command, where the image's
// root is (the container's "/", a test's temporary tree), and the
// workload's PATH.
type Input struct {
	Base        harden.Policy
	Argv        []string
	ShellAccess bool
	Root        string // "/" in the container
	PathEnv     string // the workload's PATH ("" for DefaultPath)
	Self        string // the launcher's path in the container, never granted
}

// Planned is the workload's policy and the resolved command.
type Planned struct {
	Policy harden.Policy
	// Program is the absolute path execve gets (argv[0] resolved in
	// PATH; symbolic links are left for the kernel to follow).
	Program string
	Argv    []string
	// Interpreters are the files the kernel opens for execution to start
	// Program: a script's interpreter, the ELF interpreter (dynamic
	// loader) of each. Without shell_access they and Program are the
	// only executable files.
	Interpreters []string
}

// Plan derives the workload's policy from in.Base: the image's top-level
// directories become read-only (read and execute with shell_access), the
// base's writable directories stay writable without execute, the
// launcher itself is left out, and the execute right goes to the program
// and its interpreters only (without shell_access). NoSpawn is turned
// off in the seccomp filter — the launcher's own execve must pass — and
// replaced by Landlock's execute right and the supervisor's one-execve
// rule.
func Plan(in Input) (Planned, error) {
	if err := in.Base.Validate(); err != nil {
		return Planned{}, err
	}
	if len(in.Argv) == 0 || in.Argv[0] == "" {
		return Planned{}, errors.New("no command to run: give one after -- or in the image (CMD/ENTRYPOINT)")
	}
	root := in.Root
	if root == "" {
		root = "/"
	}
	prog, err := lookPath(root, in.Argv[0], in.PathEnv)
	if err != nil {
		return Planned{}, err
	}
	interps, err := interpreters(root, prog, in.ShellAccess)
	if err != nil {
		return Planned{}, err
	}
	p := in.Base
	p.Role = Role
	p.NoSpawn = false
	l := p.Landlock
	writable := append(slices.Clone(l.ReadWriteDirs), l.ReadWriteFiles...)
	imageDirs, err := imageTree(root, writable, in.Self)
	if err != nil {
		return Planned{}, err
	}
	// The image's tree replaces the base's own read-only directories
	// that lie in it (/etc); the others (/proc) stay.
	var ro []string
	for _, d := range l.ReadOnlyDirs {
		if !slices.ContainsFunc(imageDirs, func(top string) bool { return within(d, top) }) {
			ro = append(ro, d)
		}
	}
	// The base's own binary (/mcpsidecar in our image) is not in a user's
	// image: the exec right goes to the workload's files instead.
	l.ExecFiles = nil
	l.ExecDirs = nil
	if in.ShellAccess {
		l.ExecDirs = imageDirs
		l.ReadOnlyDirs = ro
		// The command itself, wherever it is: under test-sandbox it is
		// the launcher's own file, which no image directory covers.
		if !slices.ContainsFunc(imageDirs, func(d string) bool { return within(prog, d) }) {
			l.ExecFiles = []string{prog}
		}
	} else {
		l.ReadOnlyDirs = append(ro, imageDirs...)
		l.ExecFiles = append([]string{prog}, interps...)
	}
	l.ReadOnlyDirs = orEmpty(l.ReadOnlyDirs)
	p.Landlock = l
	return Planned{Policy: p, Program: prog, Argv: slices.Clone(in.Argv), Interpreters: interps}, p.Validate()
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// imageTree lists the image's top-level directories: every directory in
// the root except the kernel interfaces, the writable mounts and anything
// holding the launcher. A rule on "/" itself would cover the writable
// mounts too (Landlock rules only add), so the tree is granted directory
// by directory. Top-level symbolic links (/bin -> usr/bin) are left out:
// their targets are granted.
func imageTree(root string, writable []string, self string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("listing the image's root: %w", err)
	}
	var dirs []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		p := "/" + e.Name()
		skip := slices.Contains(notImage, p) || (self != "" && within(self, p))
		for _, w := range writable {
			if within(w, p) {
				skip = true // /tmp, or a directory holding a writable one
			}
		}
		if !skip {
			dirs = append(dirs, split(root, p)...)
		}
	}
	return dirs, nil
}

// split returns dir, or, when a hidden path lies below it, the
// directories below dir that hold no hidden path (recursively), so a rule
// never covers a hidden one. Files directly in a split directory are left
// out: the images seen hold none a workload reads (/var, /var/lib).
func split(root, dir string) []string {
	if slices.Contains(hiddenInImage, dir) {
		return nil
	}
	if !slices.ContainsFunc(hiddenInImage, func(h string) bool { return within(h, dir) }) {
		return []string{dir}
	}
	entries, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		return nil // unreadable: grant nothing
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, split(root, path.Join(dir, e.Name()))...)
		}
	}
	return out
}

// lookPath resolves name like execvp: an absolute path as is, a bare name
// in each PATH entry, the first regular file with an execute bit.
func lookPath(root, name, pathEnv string) (string, error) {
	if strings.HasPrefix(name, "/") {
		if err := executable(root, name); err != nil {
			return "", fmt.Errorf("program %s: %w", name, err)
		}
		return path.Clean(name), nil
	}
	if strings.Contains(name, "/") {
		return "", fmt.Errorf("program %q is a relative path: give an absolute path or a bare name looked up in PATH", name)
	}
	if pathEnv == "" {
		pathEnv = DefaultPath
	}
	for _, dir := range strings.Split(pathEnv, ":") {
		if !strings.HasPrefix(dir, "/") {
			continue // a relative PATH entry resolves against the working directory
		}
		p := path.Join(dir, name)
		if executable(root, p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("program %q not found in PATH %s of the image", name, pathEnv)
}

func executable(root, p string) error {
	fi, err := os.Stat(filepath.Join(root, p))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return errors.New("no such file in the image")
		}
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return errors.New("not executable (no x bit)")
	}
	return nil
}

// maxShebang is what the kernel reads of a script's first line.
const maxShebang = 256

// interpreters lists what the kernel opens for execution to start prog:
// for a script its interpreter (one level, as Linux allows only
// binfmt_script -> ELF without further scripts in practice), and for each
// ELF file its PT_INTERP. A script run through env starts a second
// program by name, which only shell_access allows.
func interpreters(root, prog string, shell bool) ([]string, error) {
	f, err := os.Open(filepath.Join(root, prog))
	if err != nil {
		return nil, fmt.Errorf("program %s: %w", prog, err)
	}
	defer f.Close()
	head := make([]byte, maxShebang)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	var out []string
	elfFile := prog
	if bytes.HasPrefix(head, []byte("#!")) {
		line, _, _ := bytes.Cut(head[2:], []byte("\n"))
		fields := strings.Fields(string(line))
		if len(fields) == 0 || !strings.HasPrefix(fields[0], "/") {
			return nil, fmt.Errorf("program %s: a script without an absolute interpreter on its #! line", prog)
		}
		interp := path.Clean(fields[0])
		if path.Base(interp) == "env" && !shell {
			return nil, fmt.Errorf("program %s is a script run through %s, which starts another program by name: without shell_access give the interpreter as the command (e.g. [\"python3\", %q])", prog, interp, prog)
		}
		if err := executable(root, interp); err != nil {
			return nil, fmt.Errorf("interpreter %s of %s: %w", interp, prog, err)
		}
		out = append(out, interp)
		elfFile = interp
	}
	ld, err := elfInterp(filepath.Join(root, elfFile))
	if err != nil {
		return nil, fmt.Errorf("program %s: %w", elfFile, err)
	}
	if ld != "" {
		out = append(out, ld)
	}
	return out, nil
}

// elfInterp returns an ELF file's PT_INTERP (the dynamic loader), or ""
// for a static executable.
func elfInterp(file string) (string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return "", fmt.Errorf("not an ELF executable or a #! script: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(p.Open(), 4096))
		if err != nil {
			return "", fmt.Errorf("reading PT_INTERP: %w", err)
		}
		s := string(bytes.TrimRight(b, "\x00"))
		if !strings.HasPrefix(s, "/") {
			return "", fmt.Errorf("PT_INTERP %q is not an absolute path", s)
		}
		return path.Clean(s), nil
	}
	return "", nil
}
