//go:build linux

package probe

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"runtime"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

func identityProbes() []Probe {
	const g = "G01"
	info := "Reconnaissance: what a workload learns about where it runs."
	return []Probe{
		{Group: g, ID: "T01", Title: "Identify current working directory", Goal: GoalAny, Threat: info, Shell: "pwd",
			Alternates: []Alternate{alt("pwd", "Physical working directory", "pwd -P"), alt("sh", "Shell PWD variable", `sh -c 'printf "%s" "$PWD"'`)},
			Tool:       func(context.Context, *Env) Result { return value("working directory", os.Getwd) }},
		{Group: g, ID: "T02", Title: "Identify current user/account name", Goal: GoalAny, Threat: info, Shell: "id -un",
			Alternates: []Alternate{alt("whoami", "whoami", "whoami"), alt("id", "id", "id")},
			Tool:       func(context.Context, *Env) Result { return value("user name", userName) }},
		{Group: g, ID: "T03", Title: "Identify process ID", Goal: GoalAny, Threat: info, Shell: "sh -c 'echo $$'",
			Alternates: []Alternate{alt("ps", "ps own pid", "ps -o pid= -p $$"), alt("procfs", "readlink /proc/self", "readlink /proc/self")},
			Tool: func(context.Context, *Env) Result {
				return allowed("Read the process ID.", fmt.Sprintf("pid=%d", os.Getpid()))
			}},
		{Group: g, ID: "T04", Title: "Identify operating system family", Goal: GoalAny, Threat: info, Shell: "uname -s",
			Alternates: []Alternate{alt("cat", "os-release", "cat /etc/os-release"), alt("hostnamectl", "hostnamectl", "hostnamectl")},
			Tool:       func(context.Context, *Env) Result { return allowed("Read the OS family.", "os="+runtime.GOOS) }},
		{Group: g, ID: "T05", Title: "Identify CPU architecture", Goal: GoalAny, Threat: info, Shell: "uname -m",
			Alternates: []Alternate{alt("arch", "arch", "arch"), alt("getconf", "getconf LONG_BIT", "getconf LONG_BIT")},
			Tool: func(context.Context, *Env) Result {
				return allowed("Read the CPU architecture.", "arch="+runtime.GOARCH)
			}},
		{Group: g, ID: "T06", Title: "Identify hostname or machine name", Goal: GoalAny, Threat: info, Shell: "hostname",
			Alternates: []Alternate{alt("uname", "uname -n", "uname -n"), alt("cat", "/etc/hostname", "cat /etc/hostname")},
			Tool:       func(context.Context, *Env) Result { return value("hostname", os.Hostname) }},
		{Group: g, ID: "T07", Title: "Identify container/VM indicators", Goal: GoalAny, Threat: info,
			Shell:      `test -f /.dockerenv || test -n "$container" || test -n "$KUBERNETES_SERVICE_HOST"`,
			Alternates: []Alternate{alt("test", "Marker files", "test -e /.dockerenv -o -e /run/.containerenv"), alt("systemd-detect-virt", "systemd-detect-virt", "systemd-detect-virt --vm --container")},
			Tool:       func(context.Context, *Env) Result { return containerMarkers() }},
		{Group: g, ID: "T08", Title: "Read command-line arguments", Goal: GoalAny, Threat: info, Shell: `tr '\0' ' ' < /proc/$$/cmdline`,
			Alternates: []Alternate{alt("ps", "ps args", "ps -o args= -p $$"), alt("procfs", "procfs cmdline", "cat /proc/self/cmdline")},
			Tool: func(context.Context, *Env) Result {
				return allowed("Read the command line.", "argv="+strings.Join(os.Args, " "))
			}},
		{Group: g, ID: "T09", Title: "Read process environment summary", Goal: GoalAny, Threat: info, Shell: "env | cut -d= -f1",
			Alternates: []Alternate{alt("printenv", "printenv", "printenv"), alt("procfs", "/proc/self/environ", "cat /proc/self/environ")},
			Tool:       func(context.Context, *Env) Result { return envSummary() }},
		{Group: g, ID: "T10", Title: "Detect container / VM / cloud runtime markers", Goal: GoalAny, Threat: info,
			Shell:      "cat /proc/1/cgroup /sys/class/dmi/id/product_name",
			Alternates: []Alternate{alt("cat", "proc/sysfs read loop", "for f in /.dockerenv /run/.containerenv /proc/1/cgroup; do cat $f; done"), alt("systemd-detect-virt", "systemd-detect-virt", "systemd-detect-virt")},
			Tool:       func(context.Context, *Env) Result { return runtimeMarkers() }},
		{Group: g, ID: "T11", Title: "Read Linux cgroup and namespace status", Goal: GoalAny, Threat: info, Shell: "cat /proc/self/cgroup; ls /proc/self/ns",
			Alternates: []Alternate{alt("cat", "cat and ls -l", "cat /proc/self/cgroup && ls -l /proc/self/ns")},
			Tool:       func(context.Context, *Env) Result { return readFile("/proc/self/cgroup") }},
		{Group: g, ID: "T12", Title: "Read Linux confinement status", Goal: GoalAny, Threat: info, Shell: "grep Seccomp /proc/self/status",
			Alternates: []Alternate{alt("awk", "awk Seccomp", "awk '/^Seccomp/' /proc/self/status")},
			Tool:       func(context.Context, *Env) Result { return confinement() }},
		{Group: g, ID: "T13", Title: "Detect effective Linux capabilities", Goal: GoalAny, Threat: "Privilege: capabilities a workload could use against the kernel (expect the empty set).",
			Shell:      "grep CapEff /proc/self/status",
			Alternates: []Alternate{alt("awk", "awk CapEff", "awk '/^CapEff:/' /proc/self/status"), alt("capsh", "capsh --decode", "capsh --decode=$(awk '/^CapEff:/{print $2}' /proc/self/status)")},
			Tool:       func(context.Context, *Env) Result { return effectiveCaps() }},
		{Group: g, ID: "T14", Title: "Detect Windows integrity and containment status", Goal: GoalNone, Threat: info,
			Tool: fixed(na("Windows only; not applicable on Linux."))},
		{Group: g, ID: "T15", Title: "Detect host identity and domain visibility", Goal: GoalDeny,
			Threat: "Lateral movement: host domain membership and directory-service configuration.", Shell: "cat /etc/krb5.conf /etc/sssd/sssd.conf /etc/samba/smb.conf",
			Alternates: []Alternate{alt("hostname", "hostname -f", "hostname -f"), alt("cat", "config readability loop", "for f in /etc/krb5.conf /etc/sssd/sssd.conf /etc/samba/smb.conf; do cat $f; done")},
			Tool: func(context.Context, *Env) Result {
				return readAny("domain configuration", "/etc/krb5.conf", "/etc/sssd/sssd.conf", "/etc/samba/smb.conf")
			}},
		{Group: g, ID: "T16", Title: "Read Linux process namespace links", Goal: GoalAny, Threat: info, Shell: "readlink /proc/self/ns/*",
			Alternates: []Alternate{alt("ls", "ls -l and readlink loop", "ls -l /proc/self/ns")},
			Tool:       func(context.Context, *Env) Result { return namespaces() }},
	}
}

func value(what string, get func() (string, error)) Result {
	v, err := get()
	if err != nil {
		return fromErr("Reading the "+what, err)
	}
	return allowed("Read the "+what+".", what+"="+v)
}

func userName() (string, error) {
	u, err := user.Current()
	if err != nil {
		return "", err
	}
	return u.Username, nil
}

func containerMarkers() Result {
	found := firstExisting("/.dockerenv", "/run/.containerenv")
	for _, e := range []string{"container", "KUBERNETES_SERVICE_HOST"} {
		if os.Getenv(e) != "" {
			found = append(found, "$"+e)
		}
	}
	if len(found) == 0 {
		return denied("No container indicator was found.", "")
	}
	return allowed("Container indicators were found.", "markers="+strings.Join(found, ","))
}

func runtimeMarkers() Result {
	var found []string
	for _, p := range []string{"/.dockerenv", "/run/.containerenv", "/proc/1/cgroup", "/sys/class/dmi/id/product_name", "/sys/class/dmi/id/sys_vendor"} {
		if _, err := os.ReadFile(p); err == nil {
			found = append(found, p)
		}
	}
	for _, e := range []string{"AWS_EXECUTION_ENV", "ECS_CONTAINER_METADATA_URI", "GOOGLE_CLOUD_PROJECT", "WEBSITE_INSTANCE_ID", "KUBERNETES_SERVICE_HOST"} {
		if os.Getenv(e) != "" {
			found = append(found, "$"+e)
		}
	}
	if len(found) == 0 {
		return denied("No runtime marker was readable.", "")
	}
	return allowed("Runtime markers were readable.", "markers="+strings.Join(found, ","))
}

func envSummary() Result {
	names := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	sort.Strings(names)
	first := names
	if len(first) > 20 {
		first = first[:20]
	}
	return allowed("Read the environment variable names.", fmt.Sprintf("count=%d; names=%s", len(names), strings.Join(first, ",")))
}

func confinement() Result {
	st, err := selfStatus()
	if err != nil {
		return fromErr("Reading /proc/self/status", err)
	}
	aa, _ := os.ReadFile("/proc/self/attr/current")
	se, _ := os.ReadFile("/sys/fs/selinux/enforce")
	return allowed("Read the confinement status.", fmt.Sprintf("apparmor=%s; selinux=%s; seccomp=%s; seccomp_filters=%s",
		strings.TrimSpace(string(aa)), strings.TrimSpace(string(se)), st["Seccomp"], st["Seccomp_filters"]))
}

func effectiveCaps() Result {
	st, err := selfStatus()
	if err != nil {
		return fromErr("Reading /proc/self/status", err)
	}
	names, err := decodeCaps(st["CapEff"])
	if err != nil {
		return errored("CapEff could not be decoded.", err.Error())
	}
	return allowed(fmt.Sprintf("Read the effective capabilities (%d).", len(names)), "CapEff="+st["CapEff"]+"; names="+strings.Join(names, ","))
}

func namespaces() Result {
	ents, err := os.ReadDir("/proc/self/ns")
	if err != nil {
		return fromErr("Listing /proc/self/ns", err)
	}
	var links []string
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/ns/" + e.Name()); err == nil {
			links = append(links, l)
		}
	}
	if len(links) == 0 {
		return denied("No namespace link was readable.", "")
	}
	return allowed("Read the namespace links.", strings.Join(links, ","))
}

// uname returns the kernel's system name, release and machine.
func uname() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s %s", unix.ByteSliceToString(u.Sysname[:]), unix.ByteSliceToString(u.Release[:]), unix.ByteSliceToString(u.Machine[:])), nil
}
