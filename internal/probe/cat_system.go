//go:build linux

package probe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const threatSystem = "Tampering with system configuration, services and schedules (persistence)."

func systemProbes() []Probe {
	const g = "G19"
	return []Probe{
		{Group: g, ID: "T01", Title: "Read system configuration summary", Goal: GoalAny, Threat: "Reconnaissance.", Shell: "uname -sr; uname -m; hostname",
			Alternates: []Alternate{alt("hostnamectl", "hostnamectl", "hostnamectl"), alt("uname", "uname -a", "uname -a")},
			Tool:       func(context.Context, *Env) Result { return value("kernel", uname) }},
		{Group: g, ID: "T02", Title: "Read installed software list", Goal: GoalDeny, Threat: "Reconnaissance of vulnerable packages.", Shell: "dpkg-query -W",
			Alternates: []Alternate{alt("apt", "apt list --installed", "apt list --installed")},
			Tool: func(context.Context, *Env) Result {
				return readAny("package database", "/var/lib/dpkg/status", "/lib/apk/db/installed", "/var/lib/rpm/Packages", "/var/lib/rpm/rpmdb.sqlite")
			}},
		{Group: g, ID: "T03", Title: "Read network configuration", Goal: GoalAny, Threat: "Reconnaissance of networks.", Shell: "ip -o addr; ip route",
			Alternates: []Alternate{alt("ip", "ip route show", "ip route show; cat /etc/resolv.conf")},
			Tool:       func(context.Context, *Env) Result { return interfaces() }},
		{Group: g, ID: "T04", Title: "Read host firewall status", Goal: GoalDeny, Threat: "Reconnaissance of firewall rules.", Shell: "iptables -S",
			Alternates: []Alternate{alt("iptables", "iptables -S", "iptables -S"), alt("nft", "nft list ruleset", "nft list ruleset")},
			Tool: func(ctx context.Context, _ *Env) Result {
				return programs(ctx, "Reading firewall rules", []string{"nft", "list", "ruleset"}, []string{"iptables", "-S"}, []string{"ufw", "status"})
			}},
		{Group: g, ID: "T05", Title: "Change runtime environment configuration", Goal: GoalAny, Threat: "Benign: the process's own environment.", Shell: "export SANDBOX_TESTER_RUNTIME_PROBE=sandbox-tester-value",
			Tool: func(context.Context, *Env) Result {
				if err := os.Setenv("SANDBOX_TESTER_RUNTIME_PROBE", "sandbox-tester-value"); err != nil {
					return fromErr("Setting a variable", err)
				}
				defer os.Unsetenv("SANDBOX_TESTER_RUNTIME_PROBE")
				return allowed("Changed the process environment.", "")
			}},
		{Group: g, ID: "T06", Title: "Change user-level settings", Goal: GoalAny, Threat: "Benign: HOME is a per-run tmpfs.", Shell: "mkdir -p ~/.config/sandbox-tester && touch ~/.config/sandbox-tester/user-setting-probe.conf",
			Tool: func(context.Context, *Env) Result {
				return writeUnder(os.Getenv("HOME")+"/.config/sandbox-tester", "user-setting-probe.conf")
			}},
		{Group: g, ID: "T07", Title: "Change system-level settings", Goal: GoalDeny, Threat: threatSystem, Shell: "mkdir /etc/sandbox-tester && rmdir /etc/sandbox-tester",
			Tool: func(context.Context, *Env) Result {
				return writeUnder("/etc/sandbox-tester", "system-setting-probe.conf")
			}},
		{Group: g, ID: "T08", Title: "Install system service", Goal: GoalDeny, Threat: threatSystem, Shell: "touch /etc/systemd/system/SandboxTesterProbe.service && rm /etc/systemd/system/SandboxTesterProbe.service",
			Tool: func(context.Context, *Env) Result {
				if len(firstExisting("/etc/systemd/system")) == 0 {
					return na("No systemd unit directory exists.")
				}
				return writeUnder("/etc/systemd/system", "SandboxTesterProbe.service")
			}},
		{Group: g, ID: "T09", Title: "Modify startup item", Goal: GoalAny,
			Threat: threatSystem + " HOME is a per-run tmpfs and nothing in the image reads autostart entries, so a write persists nothing.",
			Shell:  "touch ~/.config/autostart/sandbox-tester-startup-probe.desktop",
			Tool: func(context.Context, *Env) Result {
				return writeUnder(os.Getenv("HOME")+"/.config/autostart", "sandbox-tester-startup-probe.desktop")
			}},
		{Group: g, ID: "T10", Title: "Change firewall rule", Goal: GoalDeny, Threat: threatSystem, Shell: "iptables -N SANDBOX_TESTER_PROBE && iptables -X SANDBOX_TESTER_PROBE",
			Tool: func(ctx context.Context, _ *Env) Result {
				r := program(ctx, "Creating a firewall chain", "iptables", "-N", "SANDBOX_TESTER_PROBE")
				if r.Outcome == Allowed {
					_ = program(ctx, "Removing the firewall chain", "iptables", "-X", "SANDBOX_TESTER_PROBE")
				}
				return r
			}},
		{Group: g, ID: "T11", Title: "Create scheduled task", Goal: GoalDeny, Threat: threatSystem, Shell: "crontab -l",
			Tool: func(ctx context.Context, _ *Env) Result { return cron(ctx) }},
	}
}

// interfaces reads the interfaces and addresses from /proc, not netlink:
// the sandbox refuses netlink sockets (G41 T08), and reading a file is the
// same reconnaissance.
func interfaces() Result {
	data, err := os.ReadFile("/proc/net/dev")
	if err != nil {
		return fromErr("Reading /proc/net/dev", err)
	}
	var names []string
	for _, l := range strings.Split(string(data), "\n") {
		if name, _, ok := strings.Cut(l, ":"); ok && !strings.Contains(name, "|") {
			names = append(names, strings.TrimSpace(name))
		}
	}
	var addrs []string
	if data, err := os.ReadFile("/proc/net/fib_trie"); err == nil {
		for _, a := range parseFibLocal(data) {
			addrs = append(addrs, a.String())
		}
	}
	if data, err := os.ReadFile("/proc/net/if_inet6"); err == nil {
		v6, _ := parseIfInet6(data)
		for _, a := range v6 {
			addrs = append(addrs, a.Prefix.String())
		}
	}
	return allowed(fmt.Sprintf("Read %d network interfaces.", len(names)), strings.Join(names, " ")+"; addresses "+strings.Join(addrs, " "))
}

// writeUnder creates dir (and parents) and a file in it, then removes what
// it created.
// writeUnder creates dir (and missing parents) and a file in it, then
// removes everything it created.
func writeUnder(dir, name string) Result {
	created, err := mkdirs(dir)
	defer func() {
		for i := len(created) - 1; i >= 0; i-- {
			os.Remove(created[i])
		}
	}()
	if err != nil {
		return fromErr("Creating "+dir, err)
	}
	p := dir + "/" + name
	if err := os.WriteFile(p, []byte("sandbox-tester"), 0o644); err != nil {
		return fromErr("Writing "+p, err)
	}
	os.Remove(p)
	return allowed("Wrote "+p+".", "")
}

// mkdirs creates dir and its missing parents, returning those it created.
func mkdirs(dir string) ([]string, error) {
	var missing []string
	for d := filepath.Clean(dir); d != "/" && d != "."; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		missing = append([]string{d}, missing...)
	}
	var created []string
	for _, d := range missing {
		if err := os.Mkdir(d, 0o755); err != nil {
			return created, err
		}
		created = append(created, d)
	}
	return created, nil
}

func cron(ctx context.Context) Result {
	if r := program(ctx, "Listing the crontab", "crontab", "-l"); r.Outcome != NA {
		return r
	}
	return writableAny("cron spool", "/var/spool/cron/crontabs", "/var/spool/cron", "/etc/cron.d")
}

func hardwareTimeLogProbes() []Probe {
	threatHW := "Surveillance and device access: cameras, microphones, USB and serial devices."
	dev := func(id, title, what string, patterns ...string) Probe {
		return Probe{Group: "G20", ID: id, Title: title, Goal: GoalDeny, Threat: threatHW, Shell: "ls " + strings.Join(patterns, " "),
			Tool: func(context.Context, *Env) Result { return globAny(what, patterns...) }}
	}
	return []Probe{
		dev("T01", "Read camera availability", "camera devices", "/dev/video*"),
		{Group: "G20", ID: "T02", Title: "Capture camera frame", Goal: GoalDeny, Threat: threatHW, Tool: fixed(na("No capture tool (ffmpeg, OpenCV) is in the image."))},
		dev("T03", "Read microphone availability", "sound devices", "/dev/snd/*"),
		{Group: "G20", ID: "T04", Title: "Capture audio sample", Goal: GoalDeny, Threat: threatHW, Tool: fixed(na("No capture tool (ffmpeg, sounddevice) is in the image."))},
		dev("T05", "Access printer list", "printer devices", "/dev/usb/lp*", "/dev/lp*"),
		dev("T07", "Access USB device list", "USB devices", "/sys/bus/usb/devices/*", "/dev/bus/usb/*"),
		dev("T08", "Access serial port", "serial ports", "/dev/ttyS*", "/dev/ttyUSB*", "/dev/ttyACM*"),
		dev("T09", "Access Bluetooth device list", "Bluetooth adapters", "/sys/class/bluetooth/*"),
		{Group: "G20", ID: "T10", Title: "Access GPU details", Goal: GoalAny, Threat: threatHW, Shell: "ls /sys/class/drm",
			Tool: func(context.Context, *Env) Result {
				return globAny("GPU devices", "/sys/class/drm/card*", "/dev/dri/*")
			}},
		{Group: "G21", ID: "T01", Title: "Read system time", Goal: GoalAny, Threat: "Benign.", Shell: "date --iso-8601=seconds",
			Alternates: []Alternate{alt("date", "date +format", "date +%Y-%m-%dT%H:%M:%S%z")},
			Tool: func(context.Context, *Env) Result {
				return allowed("Read the system time.", time.Now().UTC().Format(time.RFC3339))
			}},
		{Group: "G21", ID: "T05", Title: "Create background daemon/service", Goal: GoalDeny, Spawn: true, Threat: "Persistence: a process that outlives the workload's task.", Shell: "nohup sleep 2 &",
			Tool: daemonChild},
		{Group: "G21", ID: "T07", Title: "Set file watcher", Goal: GoalAny, Threat: "Benign: watching the workload's own files.", Shell: "inotifywait -t 1 -e create /sandbox-work/allowed",
			Tool: func(_ context.Context, e *Env) Result { return fileWatch(e.Ctx.AllowedDirectory) }},
		{Group: "G21", ID: "T08", Title: "Cron/user crontab on Linux", Goal: GoalDeny, Threat: threatSystem, Shell: "crontab -l",
			Tool: func(ctx context.Context, _ *Env) Result { return cron(ctx) }},
		{Group: "G21", ID: "T09", Title: "systemd user unit", Goal: GoalDeny, Threat: threatSystem, Shell: "systemctl --user daemon-reload",
			Tool: func(ctx context.Context, _ *Env) Result {
				return program(ctx, "Reloading systemd user units", "systemctl", "--user", "daemon-reload")
			}},
		{Group: "G21", ID: "T10", Title: "Windows Run key/user startup folder", Goal: GoalNone, Threat: threatSystem, Tool: fixed(na("Windows only; not applicable on Linux."))},
		{Group: "G22", ID: "T01", Title: "Write application log entry", Goal: GoalAny, Threat: "Benign: the workload's own log.", Shell: "echo x >> /sandbox-work/allowed/sandbox-tester.log",
			Tool: func(_ context.Context, e *Env) Result {
				return writeUnder(e.Ctx.AllowedDirectory, "sandbox-tester.log")
			}},
		{Group: "G22", ID: "T03", Title: "Read system logs", Goal: GoalDeny, Threat: "Reconnaissance through host logs.", Shell: "journalctl -n 1",
			Tool: func(context.Context, *Env) Result {
				return readAny("system log", "/var/log/syslog", "/var/log/messages", "/run/log/journal", "/dev/kmsg")
			}},
		{Group: "G22", ID: "T04", Title: "Read security logs", Goal: GoalDeny, Threat: "Reconnaissance through host security logs.", Shell: "cat /var/log/auth.log",
			Tool: func(context.Context, *Env) Result {
				return readAny("security log", "/var/log/auth.log", "/var/log/secure")
			}},
		{Group: "G30", ID: "T01", Title: "Local tool call, remote LLM call", Goal: GoalContext,
			Adjust: func(c *Context) Goal {
				if c.ForwardsModelKey() {
					return GoalAllow
				}
				return GoalContext
			},
			Threat: "Availability: the model API must be reachable when an OpenAI capability is granted.",
			Tool:   fixed(na("Not attempted: a model API call would leave this machine."))},
	}
}

func daemonChild(_ context.Context, e *Env) Result {
	cmd, err := e.sleeper(childLife)
	defer stop(cmd)
	if err != nil {
		return fromErr("Starting a background process", err)
	}
	time.Sleep(500 * time.Millisecond)
	// Signal 0 checks existence: EPERM (kill(2)) means the process exists
	// but may not be signalled — here when the child has entered a Landlock
	// domain of its own, whose signal scope shuts the parent out.
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil && !errors.Is(err, syscall.EPERM) {
		return denied("The background process did not survive.", err.Error())
	}
	return allowed("A background process started and survived.", fmt.Sprintf("pid=%d", cmd.Process.Pid))
}

func fileWatch(dir string) Result {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fromErr("Creating an inotify instance", err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE); err != nil {
		return fromErr("Watching "+dir, err)
	}
	p := dir + "/g21-watch-marker"
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		return fromErr("Creating the marker file", err)
	}
	defer os.Remove(p)
	buf := make([]byte, 4096)
	for i := 0; i < 20; i++ {
		if n, _ := unix.Read(fd, buf); n > 0 {
			return allowed("The watcher saw the new file.", "")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return denied("The watcher saw no event.", "")
}
