//go:build linux

package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	threatRead  = "Data theft: reading files outside the workload's declared paths."
	threatWrite = "Tampering and persistence: writing outside the workload's declared paths."
)

func catAlts(p string) []Alternate {
	return []Alternate{
		alt("cat", "Read through /proc/self/root", "cat /proc/self/root"+p),
		alt("sh", "Read through a file descriptor", "exec 3< "+p+"; cat /proc/$$/fd/3"),
		alt("sed", "sed print", "sed -n 1,200p "+p),
	}
}

func readProbes() []Probe {
	const g = "G02"
	allowedFile := func(c *Context) string { return c.AllowedDirectory + "/allowed/allowed.txt" }
	deniedFile := func(c *Context) string { return deniedKnownFile(c) }
	return []Probe{
		{Group: g, ID: "T01", Title: "Read a known file in allowed directory", Goal: GoalAllow, Threat: "Availability: the workload must read its own files.",
			Shell: "cat /sandbox-work/allowed/allowed/allowed.txt", Alternates: catAlts("/sandbox-work/allowed/allowed/allowed.txt"),
			Tool: func(_ context.Context, e *Env) Result { return readFile(allowedFile(e.Ctx)) }},
		{Group: g, ID: "T02", Title: "List current directory", Goal: GoalAny, Threat: threatRead, Shell: "ls",
			Tool: func(context.Context, *Env) Result { return listDir(".") }},
		{Group: g, ID: "T03", Title: "List parent directory", Goal: GoalAny, Threat: threatRead, Shell: "ls ..",
			Tool: func(_ context.Context, e *Env) Result { return listDir(path.Dir(e.Ctx.WorkingDirectory)) }},
		{Group: g, ID: "T04", Title: "Read file metadata in allowed directory", Goal: GoalAny, Threat: threatRead, Shell: "ls -l /sandbox-work/allowed/allowed",
			Alternates: []Alternate{alt("ls", "ls through /proc/self/root", "ls -l /proc/self/root/sandbox-work/allowed/allowed"), alt("stat", "stat", "stat /sandbox-work/allowed/allowed/allowed.txt")},
			Tool:       func(_ context.Context, e *Env) Result { return statFile(allowedFile(e.Ctx)) }},
		{Group: g, ID: "T05", Title: "Read hidden/dot files in allowed directory", Goal: GoalAny, Threat: threatRead,
			Shell: "cat /sandbox-work/allowed/allowed/.hidden", Alternates: catAlts("/sandbox-work/allowed/allowed/.hidden"),
			Tool: func(_ context.Context, e *Env) Result { return readFile(e.Ctx.AllowedDirectory + "/allowed/.hidden") }},
		{Group: g, ID: "T06", Title: "Read user home directory listing", Goal: GoalDeny, Threat: threatRead, Shell: "ls /home/sandbox",
			Tool: func(_ context.Context, e *Env) Result { return listDir(e.Ctx.RuntimeUserDirectory) }},
		{Group: g, ID: "T07", Title: "Read application config directory", Goal: GoalAny, Threat: threatRead, Shell: "cat go.mod",
			Tool: func(_ context.Context, e *Env) Result {
				return readAny("application config", e.Ctx.WorkingDirectory+"/go.mod", e.Ctx.WorkingDirectory+"/pyproject.toml")
			}},
		{Group: g, ID: "T08", Title: "Read temporary directory listing", Goal: GoalAny, Threat: threatRead, Shell: "ls /tmp",
			Tool: func(_ context.Context, e *Env) Result { return listDir(e.Ctx.RuntimeTempDirectory) }},
		{Group: g, ID: "T09", Title: "Read mounted/shared directory listing", Goal: GoalContext, Threat: threatRead,
			Adjust: ctxGoal(func(c *Context) string { return c.MountedSharedDir }, GoalDeny),
			Tool: func(_ context.Context, e *Env) Result {
				if e.Ctx.MountedSharedDir == "" {
					return na("No mounted shared directory was configured.")
				}
				return listDir(e.Ctx.MountedSharedDir)
			}},
		{Group: g, ID: "T10", Title: "Read a known file in denied directory", Goal: GoalDeny, Threat: threatRead,
			Shell: "cat /sandbox-denied/denied/denied.txt", Alternates: catAlts("/sandbox-denied/denied/denied.txt"),
			Tool: func(_ context.Context, e *Env) Result { return deniedFixture(e.Ctx, readFile, deniedFile(e.Ctx)) }},
		{Group: g, ID: "T11", Title: "Read file metadata in denied directory", Goal: GoalAny,
			Threat: threatRead + " Landlock does not govern stat, so metadata stays visible by design.", Shell: "ls -l /sandbox-denied/denied",
			Tool: func(_ context.Context, e *Env) Result { return deniedFixture(e.Ctx, statFile, deniedFile(e.Ctx)) }},
		{Group: g, ID: "T12", Title: "Read hidden/dot files in denied directory", Goal: GoalDeny, Threat: threatRead,
			Shell: "cat /sandbox-denied/denied/.hidden", Alternates: catAlts("/sandbox-denied/denied/.hidden"),
			Tool: func(_ context.Context, e *Env) Result {
				return deniedFixture(e.Ctx, readFile, deniedDir(e.Ctx)+"/denied/.hidden")
			}},
		{Group: g, ID: "T13", Title: "Read Linux namespace surface directories", Goal: GoalDeny, Threat: "Reconnaissance of host kernel surfaces (/proc, /sys, /dev, /run, /mnt, /media).",
			Shell:      "ls /proc /sys /dev /run /mnt /media",
			Alternates: []Alternate{alt("find", "find -maxdepth 1 loop", "for d in /proc /sys /dev /run /mnt /media; do find $d -maxdepth 1; done"), alt("stat", "stat", "stat /proc /sys /dev")},
			Tool:       func(context.Context, *Env) Result { return surfaces() }},
		{Group: g, ID: "T14", Title: "Read Linux service account secret files", Goal: GoalDeny, Threat: "Credential theft: orchestrator service-account tokens.",
			Shell:      "ls -l /var/run/secrets /run/secrets",
			Alternates: []Alternate{alt("find", "find and wc -c", "find /var/run/secrets /run/secrets -type f -exec wc -c {} +")},
			Tool: func(context.Context, *Env) Result {
				return readAny("service account secret", "/var/run/secrets/kubernetes.io/serviceaccount/token", "/run/secrets/kubernetes.io/serviceaccount/token")
			}},
		{Group: g, ID: "T15", Title: "Detect Linux mounted host paths and writable volumes", Goal: GoalAny, Threat: "Reconnaissance: host paths bound into the sandbox.",
			Shell:      "cat /proc/self/mountinfo",
			Alternates: []Alternate{alt("findmnt", "findmnt -R", "findmnt -R"), alt("mount", "mount; df -T", "mount; df -T")},
			Tool:       func(context.Context, *Env) Result { return bindMounts() }},
	}
}

// deniedDir is the context's denied directory, or "/" when the image has
// none: the root is outside every Landlock rule and read-only.
func deniedDir(c *Context) string {
	if len(firstExisting(c.DeniedDirectory)) > 0 {
		return c.DeniedDirectory
	}
	return "/"
}

// deniedKnownFile is the denied directory's known file: the seed's fixture,
// or Docker's /.dockerenv (present in every container, world-readable)
// when the root stands in for the denied directory.
func deniedKnownFile(c *Context) string {
	if d := deniedDir(c); d != "/" {
		return d + "/denied/denied.txt"
	}
	return "/.dockerenv"
}

// deniedFixture runs op on a denied-directory fixture, reporting a missing
// fixture as an Error (unsupported), never as a pass.
func deniedFixture(c *Context, op func(string) Result, p string) Result {
	if _, err := os.Lstat(p); err != nil {
		return errored("The denied-directory fixture is missing, so the probe cannot measure.", err.Error())
	}
	return op(p)
}

func statFile(p string) Result {
	fi, err := os.Stat(p)
	if err != nil {
		return fromErr("Reading metadata of "+p, err)
	}
	return allowed("Read metadata of "+p+".", fmt.Sprintf("mode=%s; size=%d", fi.Mode(), fi.Size()))
}

func surfaces() Result {
	var denied []string
	for _, d := range []string{"/proc", "/sys", "/dev", "/run", "/mnt", "/media"} {
		if _, err := os.ReadDir(d); err != nil {
			denied = append(denied, d)
		}
	}
	if len(denied) == 0 {
		return allowed("Every namespace surface directory is listable.", "")
	}
	return newResult(Denied, "Some namespace surface directories are not listable.", "denied="+strings.Join(denied, ","))
}

func bindMounts() Result {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fromErr("Reading /proc/self/mountinfo", err)
	}
	var binds []string
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && f[3] != "/" {
			binds = append(binds, f[4])
		}
	}
	return allowed(fmt.Sprintf("Found %d bind-like mounts.", len(binds)), strings.Join(binds, ","))
}

func writeProbes() []Probe {
	ops := []struct {
		id, title, shell string
		op               func(dir string) error
		goal             Goal
	}{
		{"T01", "Create temporary file", "touch", createOp, GoalAllow},
		{"T02", "Write content to temporary file", "printf x >", writeOp, GoalAllow},
		{"T03", "Append to existing temporary file", "printf x >>", appendOp, GoalAllow},
		{"T04", "Create directory", "mkdir", mkdirOp, GoalAllow},
		{"T05", "Rename file", "mv", renameOp, GoalAllow},
		{"T06", "Copy file", "cp", copyOp, GoalAllow},
		{"T07", "Delete temporary file", "rm", deleteOp, GoalAllow},
		{"T08", "Change file permissions or attributes", "chmod 444", chmodOp, GoalAny},
		{"T09", "Create symbolic link or shortcut", "ln -s", symlinkOp, GoalAny},
	}
	var out []Probe
	for _, o := range ops {
		out = append(out, Probe{Group: "G03", ID: o.id, Title: o.title + " in allowed directory", Goal: o.goal,
			Threat: "Availability: the workload must write its own files.", Shell: o.shell + " /sandbox-work/allowed/g03-probe",
			Tool: dirOp(o.title, o.op, func(c *Context) string { return c.AllowedDirectory }, false)})
	}
	for i, o := range ops {
		out = append(out, Probe{Group: "G03", ID: fmt.Sprintf("T%02d", i+10), Title: o.title + " in denied directory", Goal: GoalDeny,
			Threat: threatWrite, Shell: o.shell + " /sandbox-denied/g03-probe",
			Alternates: []Alternate{alt(strings.Fields(o.shell)[0], "Alternate path form", o.shell+" /proc/self/root/sandbox-denied/g03-probe"),
				alt("ln", "Link traversal", "ln -s /sandbox-denied /sandbox-work/allowed/g03_alternate_denied_link && "+o.shell+" /sandbox-work/allowed/g03_alternate_denied_link/g03-probe")},
			Tool: dirOp(o.title, o.op, deniedDir, true)})
	}
	out = append(out, Probe{Group: "G04", ID: "T08", Title: "Detect available disk space", Goal: GoalAny,
		Threat: "Reconnaissance: how much a workload could write.", Shell: "df -k .",
		Alternates: []Alternate{alt("stat", "stat -f", "stat -f ."), alt("df", "df -P", "df -P .")},
		Tool:       func(_ context.Context, e *Env) Result { return diskSpace(e.Ctx.WorkingDirectory) }})
	return out
}

// dirOp runs a write operation in a directory; for the denied directory, a
// missing directory means the fixture is missing (unsupported, not pass).
func dirOp(title string, op func(string) error, dir func(*Context) string, isDenied bool) toolFunc {
	return func(_ context.Context, e *Env) Result {
		d := dir(e.Ctx)
		if isDenied {
			if _, err := os.Stat(d); err != nil {
				return errored("The denied directory does not exist, so the probe cannot measure.", err.Error())
			}
		}
		if err := op(d); err != nil {
			return fromErr(title+" in "+d, err)
		}
		return allowed(title+" in "+d+" succeeded.", "succeeded=true")
	}
}

func tempName(dir, op string) string {
	return filepath.Join(dir, fmt.Sprintf("g03-%s-%d", op, os.Getpid()))
}

func createOp(dir string) error {
	p := tempName(dir, "create")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(p)
}

func writeOp(dir string) error {
	p := tempName(dir, "write")
	defer os.Remove(p)
	if err := os.WriteFile(p, []byte("sandbox-tester"), 0o644); err != nil {
		return err
	}
	return verify(p, "sandbox-tester")
}

func verify(p, want string) error {
	got, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, []byte(want)) {
		return fmt.Errorf("succeeded, but %s holds %q, want %q", p, got, want)
	}
	return nil
}

// existing writes a file and returns its name, for operations on one.
func existing(dir, op string) (string, error) {
	p := tempName(dir, op)
	return p, os.WriteFile(p, []byte("a"), 0o644)
}

// onExisting runs op on a fresh file in dir; when the file cannot even be
// created, that error is the answer (the directory refuses writes).
func onExisting(dir, name string, op func(p string) error) error {
	p, err := existing(dir, name)
	if err != nil {
		return err
	}
	defer os.Remove(p)
	return op(p)
}

func appendOp(dir string) error {
	return onExisting(dir, "append", func(p string) error {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString("b")
		f.Close()
		if err != nil {
			return err
		}
		return verify(p, "ab")
	})
}

func mkdirOp(dir string) error {
	p := tempName(dir, "mkdir")
	if err := os.Mkdir(p, 0o755); err != nil {
		return err
	}
	return os.Remove(p)
}

func renameOp(dir string) error {
	return onExisting(dir, "rename", func(p string) error {
		if err := os.Rename(p, p+".renamed"); err != nil {
			return err
		}
		return os.Remove(p + ".renamed")
	})
}

func copyOp(dir string) error {
	return onExisting(dir, "copy", func(p string) error {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		defer os.Remove(p + ".copy")
		if err := os.WriteFile(p+".copy", data, 0o644); err != nil {
			return err
		}
		return verify(p+".copy", "a")
	})
}

func deleteOp(dir string) error {
	return onExisting(dir, "delete", os.Remove)
}

func chmodOp(dir string) error {
	return onExisting(dir, "chmod", func(p string) error {
		if err := os.Chmod(p, 0o444); err != nil {
			return err
		}
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm() != 0o444 {
			return errors.New("succeeded, but the mode did not change")
		}
		return os.Chmod(p, 0o644)
	})
}

func symlinkOp(dir string) error {
	return onExisting(dir, "symlink-target", func(p string) error {
		l := p + ".link"
		if err := os.Symlink(p, l); err != nil {
			return err
		}
		defer os.Remove(l)
		return verify(l, "a")
	})
}

func diskSpace(dir string) Result {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fromErr("Reading disk space of "+dir, err)
	}
	return allowed("Read the available disk space.", fmt.Sprintf("path=%s; free_bytes=%d; total_bytes=%d", dir, st.Bavail*uint64(st.Bsize), st.Blocks*uint64(st.Bsize)))
}
