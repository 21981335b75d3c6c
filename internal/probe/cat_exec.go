//go:build linux

package probe

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	threatSpawn = "Arbitrary code execution: starting programs beyond the workload's own binary."
	threatKeys  = "Credential theft: model and cloud API keys visible to the workload."
)

func envExecProbes() []Probe {
	return append([]Probe{
		{Group: "G05", ID: "T01", Title: "List environment variable names", Goal: GoalAny, Threat: threatKeys, Shell: "env | cut -d= -f1",
			Alternates: []Alternate{alt("printenv", "printenv | sed", "printenv | sed 's/=.*//'"), alt("bash", "compgen -e", "bash -c 'compgen -e'"), alt("procfs", "/proc/self/environ", "cat /proc/self/environ")},
			Tool:       func(context.Context, *Env) Result { return envSummary() }},
		{Group: "G05", ID: "T04", Title: "Read path/search-path variable", Goal: GoalAny, Threat: "Reconnaissance: where programs would be looked up.", Shell: `printf "%s" "$PATH"`,
			Alternates: []Alternate{alt("printenv", "printenv PATH", "printenv PATH")},
			Tool: func(context.Context, *Env) Result {
				if v, ok := os.LookupEnv("PATH"); ok {
					return allowed("PATH is set.", "PATH="+v)
				}
				return denied("PATH is not set.", "")
			}},
		{Group: "G05", ID: "T05", Title: "Access model/API credentials in environment/config", Goal: GoalDeny,
			Threat: threatKeys + " Judged on the process's own environment (and /proc/self/environ): a credential the gateway holds " +
				"must appear only as the run's placeholder, and no other variable may hold a key. A credential the spec puts in the sandbox " +
				"(credentials_in_sandbox, the Squid engine) is a recorded softening, named, not judged. Other processes and files: G40 T19.",
			Shell:      "env | grep -E '_API_KEY|_TOKEN' | cut -d= -f1",
			Alternates: []Alternate{alt("grep", "env grep", "env | grep -c API_KEY"), alt("sh", "shell parameter check", `test -n "$OPENAI_API_KEY"`)},
			Tool:       func(_ context.Context, e *Env) Result { return ownEnvironment(e.Ctx) }},
	}, execProbes()...)
}

func execProbes() []Probe {
	const g = "G06"
	return []Probe{
		{Group: g, ID: "T01", Title: "Run harmless built-in command", Goal: GoalDeny, Spawn: true, Threat: threatSpawn, Shell: "echo sandbox-tester",
			Alternates: []Alternate{alt("printf", "printf", "printf sandbox-tester"), alt("env", "env echo", "env echo sandbox-tester")},
			Tool:       runSelfVersion},
		{Group: g, ID: "T02", Title: "Run language interpreter", Goal: GoalDeny, Spawn: true, Threat: threatSpawn, Shell: `python3 -c "print('sandbox-tester')"`,
			Alternates: []Alternate{alt("python", "python3 -c", `python3 -c "print(1)"`), alt("perl", "perl -e", "perl -e 'print 1'")},
			Tool: func(ctx context.Context, _ *Env) Result {
				return programs(ctx, "Running an interpreter", []string{"python3", "-c", "print(1)"}, []string{"python", "-c", "print(1)"},
					[]string{"perl", "-e", "print 1"}, []string{"node", "-e", "1"}, []string{"ruby", "-e", "1"})
			}},
		{Group: g, ID: "T03", Title: "Run shell command through shell", Goal: GoalDeny, Spawn: true, Threat: threatSpawn, Shell: "sh -c 'echo sandbox-tester-shell'",
			Alternates: []Alternate{alt("bash", "bash -lc", "bash -lc 'echo x'"), alt("env", "env sh -c", "env sh -c 'echo x'")},
			Tool: func(ctx context.Context, _ *Env) Result {
				return programs(ctx, "Running a shell", []string{"sh", "-c", "echo sandbox-tester-shell"}, []string{"bash", "-c", "echo x"}, []string{"busybox", "sh", "-c", "echo x"})
			}},
		{Group: g, ID: "T04", Title: "Run command without shell", Goal: GoalDeny, Spawn: true, Threat: threatSpawn, Shell: "uname -s",
			Alternates: []Alternate{alt("uname", "uname -s", "uname -s")},
			Tool:       runSelfVersion},
		{Group: g, ID: "T05", Title: "Invoke package manager", Goal: GoalDeny, Threat: "Supply chain: installing code at run time.", Shell: "python -m pip --version",
			Alternates: []Alternate{alt("pip", "pip", "pip --version"), alt("pip3", "pip3", "pip3 --version"), alt("apt", "apt-get", "apt-get --version")},
			Tool: func(ctx context.Context, _ *Env) Result {
				return programs(ctx, "Invoking a package manager", []string{"pip", "--version"}, []string{"pip3", "--version"}, []string{"apt-get", "--version"}, []string{"apk", "--version"}, []string{"npm", "--version"})
			}},
		{Group: g, ID: "T06", Title: "Invoke compiler or build tool", Goal: GoalDeny, Threat: threatSpawn, Shell: "cc --version",
			Alternates: []Alternate{alt("go", "go version", "go version"), alt("gcc", "gcc", "gcc --version")},
			Tool: func(ctx context.Context, _ *Env) Result {
				return programs(ctx, "Invoking a compiler", []string{"go", "version"}, []string{"cc", "--version"}, []string{"gcc", "--version"}, []string{"python3", "-m", "compileall", "-h"})
			}},
		{Group: g, ID: "T07", Title: "Invoke test runner", Goal: GoalDeny, Threat: threatSpawn, Shell: "python -m pytest --version",
			Tool: func(ctx context.Context, _ *Env) Result {
				return programs(ctx, "Invoking a test runner", []string{"pytest", "--version"}, []string{"go", "test", "-h"})
			}},
		{Group: g, ID: "T09", Title: "Invoke system administration tool", Goal: GoalDeny, Threat: "Privilege: controlling system services.", Shell: "systemctl list-units --type=service --no-pager --plain",
			Alternates: []Alternate{alt("systemctl", "systemctl", "systemctl"), alt("service", "service --status-all", "service --status-all")},
			Tool: func(ctx context.Context, _ *Env) Result {
				return programs(ctx, "Invoking systemctl", []string{"systemctl", "list-units", "--no-pager"}, []string{"service", "--status-all"})
			}},
		{Group: g, ID: "T11", Title: "Run newly created script", Goal: GoalDeny, Threat: "Code execution from writable paths: a dropped payload run by the workload.",
			Shell:      "printf '#!/bin/sh\\necho x\\n' > /sandbox-work/allowed/g06.sh && chmod +x /sandbox-work/allowed/g06.sh && /sandbox-work/allowed/g06.sh",
			Alternates: []Alternate{alt("sh", "printf and run", "printf 'echo x' > /tmp/g06.sh && sh /tmp/g06.sh")},
			Tool:       func(_ context.Context, e *Env) Result { return runWrittenScript(e) }},
		{Group: g, ID: "T12", Title: "Load a native library written at run time", Goal: GoalDeny,
			Threat: "Code execution from writable paths: native code the workload writes, mapped executable in-process (ctypes.CDLL, dlopen) " +
				"where Landlock's execute right does not look (mmap); measured in every writable path and every mount below one (an image " +
				"VOLUME is one). Sharpened from the seed's load of the image's own libc, which any " +
				"interpreter does to start: only a library written at run time is judged; anonymous executable memory (JITs, ctypes closures) " +
				"stays possible by design, inside Landlock and seccomp.",
			Shell: t12Python("/tmp"),
			Alternates: []Alternate{alt("python", "ctypes load of a written copy in /sandbox-work", t12Python("/sandbox-work")),
				alt("python", "ctypes load of a written copy in the output directory", t12Python("/sandbox-output"))},
			Tool: func(_ context.Context, e *Env) Result { return loadWritten(e) }},
		{Group: g, ID: "T13", Title: "Create and import Python module in allowed directory", Goal: GoalDeny, Threat: "Code execution: loading code written at run time.",
			Tool: fixed(na("A static Go binary (no cgo) cannot load code at run time: no plugin, no interpreter."))},
		{Group: g, ID: "T14", Title: "Call OS API with ctypes", Goal: GoalDeny, Threat: "Unmediated system calls through a foreign-function interface.",
			Tool: fixed(na("No foreign-function interface exists in a static Go binary; system calls are governed by seccomp (G40 T01)."))},
		{Group: g, ID: "T15", Title: "Spawn PowerShell with constrained-language detection", Goal: GoalNone, Threat: threatSpawn,
			Tool: fixed(na("Windows only; not applicable on Linux."))},
	}
}

// t12Python is G06 T12's shell path: Python copies the libc it runs with
// into dir and loads the copy with ctypes (exit 127 without python3).
func t12Python(dir string) string {
	return `python3 -c "import ctypes,shutil;p=[l.split()[-1] for l in open('/proc/self/maps') if 'libc.so' in l or 'libc-' in l][0];` +
		`shutil.copy(p,'` + dir + `/.g06-t12.so');ctypes.CDLL('` + dir + `/.g06-t12.so')"`
}

// runSelfVersion executes this binary's version command: in a no-shell
// image the only program there is, so the direct test of execve.
func runSelfVersion(ctx context.Context, e *Env) Result {
	if e.Self == "" {
		return errored("The probe's own executable path is unknown.", "")
	}
	r := runCmd(ctx, "Running "+e.Self+" version", e.Self, "version")
	if r.Outcome == Allowed && !strings.Contains(r.Evidence, "mcpsidecar") {
		return errored("The command ran, but its output is not the expected one.", r.Evidence)
	}
	return r
}

// runWrittenScript writes a script into each writable path and tries to
// execute it. Its interpreter is this binary (through /proc/self/exe), so
// the attempt needs no shell: if execve starts it at all, code written at
// run time ran.
func runWrittenScript(e *Env) Result {
	var ran, refused []string
	for _, dir := range e.Ctx.WritablePaths {
		p := fmt.Sprintf("%s/.g06-script-%d", dir, os.Getpid())
		if err := os.WriteFile(p, []byte("#!/proc/self/exe version\n"), 0o755); err != nil {
			continue
		}
		err := unix.Access(p, unix.X_OK)
		cmd, startErr := execStart(p)
		stop(cmd)
		os.Remove(p)
		if startErr == nil {
			ran = append(ran, dir)
		} else {
			refused = append(refused, fmt.Sprintf("%s (%v; access=%v)", dir, startErr, err))
		}
	}
	switch {
	case len(ran) > 0:
		return allowed("A script written at run time was executed.", "executed_in="+strings.Join(ran, ","))
	case len(refused) == 0:
		return errored("No writable path accepted the script, so the probe cannot measure.", "")
	}
	return denied("Execution of written scripts was refused in every writable path.", strings.Join(refused, "; "))
}

func processProbes() []Probe {
	const g = "G07"
	return []Probe{
		{Group: g, ID: "T01", Title: "List own process information", Goal: GoalAny, Threat: "Reconnaissance.", Shell: "ps -p $$ -o pid,ppid,comm",
			Alternates: []Alternate{alt("ps", "ps", "ps"), alt("head", "procfs status", "head /proc/$$/status")},
			Tool: func(context.Context, *Env) Result {
				return allowed("Read own process information.", fmt.Sprintf("pid=%d; ppid=%d", os.Getpid(), os.Getppid()))
			}},
		{Group: g, ID: "T02", Title: "List child processes", Goal: GoalDeny, Spawn: true, Threat: threatSpawn, Shell: "sleep 2 & ps --ppid $$",
			Alternates: []Alternate{alt("pgrep", "pgrep -P", "sleep 2 & pgrep -P $$")},
			Tool:       listChildren},
		{Group: g, ID: "T03", Title: "List all user processes", Goal: GoalAny, Threat: "Reconnaissance of other workloads of the same user.", Shell: "ps -u $(id -u)",
			Tool: func(context.Context, *Env) Result { return procScan(true) }},
		{Group: g, ID: "T04", Title: "List system-wide processes", Goal: GoalAny, Threat: "Reconnaissance: a PID namespace should show only the sandbox.", Shell: "ps -e",
			Alternates: []Alternate{alt("ps", "ps aux", "ps aux"), alt("find", "find /proc", "find /proc -maxdepth 1 -name '[0-9]*'")},
			Tool:       func(context.Context, *Env) Result { return procScan(false) }},
		{Group: g, ID: "T05", Title: "Start child process", Goal: GoalDeny, Spawn: true, Threat: threatSpawn, Shell: "sleep 2 &",
			Tool: func(_ context.Context, e *Env) Result {
				cmd, err := e.sleeper(childLife)
				defer stop(cmd)
				if err != nil {
					return fromErr("Starting a child process", err)
				}
				return allowed("A child process was started.", fmt.Sprintf("child_pid=%d", cmd.Process.Pid))
			}},
		{Group: g, ID: "T06", Title: "Terminate own child process", Goal: GoalDeny, Spawn: true, Threat: threatSpawn, Shell: "sleep 2 & kill $!",
			Tool: terminateChild},
		{Group: g, ID: "T08", Title: "Change process priority", Goal: GoalDeny, Spawn: true, Threat: "Resource abuse: reprioritising processes.", Shell: "sleep 2 & renice 5 -p $!",
			Tool: reniceChild},
		{Group: "G08", ID: "T01", Title: "Query CPU count", Goal: GoalAny, Threat: "Reconnaissance.", Shell: "nproc",
			Alternates: []Alternate{alt("getconf", "getconf", "getconf _NPROCESSORS_ONLN"), alt("cat", "cpuinfo", "cat /proc/cpuinfo"), alt("lscpu", "lscpu", "lscpu")},
			Tool: func(context.Context, *Env) Result {
				return allowed("Read the CPU count.", fmt.Sprintf("cpus=%d; gomaxprocs=%d", runtime.NumCPU(), runtime.GOMAXPROCS(0)))
			}},
	}
}

func listChildren(_ context.Context, e *Env) Result {
	cmd, err := e.sleeper(childLife)
	defer stop(cmd)
	if err != nil {
		return fromErr("Starting a child process to list", err)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return fromErr("Reading the child's /proc entry", err)
	}
	return allowed("Listed a child process.", fmt.Sprintf("child_pid=%d; stat=%s", cmd.Process.Pid, strings.TrimSpace(string(data))))
}

func terminateChild(_ context.Context, e *Env) Result {
	cmd, err := e.sleeper(childLife)
	if err != nil {
		return fromErr("Starting a child process to terminate", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		stop(cmd)
		return fromErr("Terminating the child", err)
	}
	err = cmd.Wait()
	return allowed("Started and terminated a child process.", fmt.Sprintf("wait=%v", err))
}

func reniceChild(_ context.Context, e *Env) Result {
	cmd, err := e.sleeper(childLife)
	defer stop(cmd)
	if err != nil {
		return fromErr("Starting a child process to renice", err)
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, cmd.Process.Pid, 5); err != nil {
		return fromErr("Renicing the child", err)
	}
	return allowed("Changed a child's priority.", fmt.Sprintf("child_pid=%d; nice=5", cmd.Process.Pid))
}

func procScan(sameUser bool) Result {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return fromErr("Listing /proc", err)
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if fi, err := os.Stat("/proc/" + e.Name()); err == nil {
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !sameUser || (ok && int(st.Uid) == os.Getuid()) {
				n++
			}
		}
	}
	return allowed(fmt.Sprintf("%d processes are visible.", n), fmt.Sprintf("processes=%d", n))
}
