//go:build linux

package probe

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

const threatDesktop = "Desktop takeover: screen, input and clipboard of a user session."

func ipcUIProbes() []Probe {
	return []Probe{
		{Group: "G11", ID: "T01", Title: "Create local socket/pipe", Goal: GoalAny, Threat: "Covert local channels.", Shell: "mkfifo /tmp/g11-fifo",
			Tool: func(context.Context, *Env) Result {
				r, w, err := os.Pipe()
				if err != nil {
					return fromErr("Creating a pipe", err)
				}
				r.Close()
				w.Close()
				return loopbackRoundTrip("tcp", "127.0.0.1:0")
			}},
		{Group: "G11", ID: "T02", Title: "Connect to existing local socket/pipe", Goal: GoalAny, Threat: "Covert local channels.", Shell: "nc -z 127.0.0.1 1",
			Alternates: []Alternate{alt("nc", "nc -z", "nc -z 127.0.0.1 1"), alt("bash", "bash /dev/tcp", "bash -c 'echo > /dev/tcp/127.0.0.1/1'")},
			Tool:       func(context.Context, *Env) Result { return loopbackRoundTrip("tcp", "127.0.0.1:0") }},
		{Group: "G11", ID: "T03", Title: "Use shared memory mechanism", Goal: GoalAny, Threat: "Covert channels through shared memory.", Shell: "ls /dev/shm",
			Tool: func(context.Context, *Env) Result { return sharedMemory() }},
		{Group: "G11", ID: "T04", Title: "Use message queue mechanism", Goal: GoalAny, Threat: "Covert channels through System V IPC.", Shell: "ipcmk -Q",
			Tool: func(context.Context, *Env) Result { return messageQueue() }},
		{Group: "G11", ID: "T05", Title: "Use clipboard", Goal: GoalDeny, Threat: threatDesktop, Shell: "xclip -o",
			Tool: func(ctx context.Context, _ *Env) Result {
				return programs(ctx, "Reading the clipboard", []string{"wl-paste"}, []string{"xclip", "-o"}, []string{"xsel", "-o"})
			}},
		{Group: "G11", ID: "T06", Title: "Query desktop automation channel", Goal: GoalDeny, Threat: threatDesktop, Shell: `test -n "$DISPLAY$WAYLAND_DISPLAY"`,
			Tool: func(context.Context, *Env) Result {
				return envOrProgram("a desktop automation channel", []string{"DISPLAY", "WAYLAND_DISPLAY"}, "gdbus", "busctl")
			}},
		ctxProbe("G11", "T08", "Access browser debugging socket", GoalDeny, func(*Context) string { return "" }),
		{Group: "G12", ID: "T01", Title: "Take screenshot", Goal: GoalDeny, Threat: threatDesktop, Shell: "import -window root /tmp/g12.png",
			Tool: func(ctx context.Context, _ *Env) Result {
				return displayOr(ctx, "Taking a screenshot", "gnome-screenshot", "import", "grim")
			}},
		{Group: "G12", ID: "T07", Title: "Open application window", Goal: GoalDeny, Threat: threatDesktop, Shell: "timeout 2 xmessage x",
			Tool: func(ctx context.Context, _ *Env) Result {
				return displayOr(ctx, "Opening a window", "zenity", "xmessage")
			}},
		{Group: "G12", ID: "T08", Title: "Read active window title", Goal: GoalDeny, Threat: threatDesktop, Shell: "xdotool getactivewindow getwindowname",
			Tool: func(ctx context.Context, _ *Env) Result {
				return displayOr(ctx, "Reading the active window", "xdotool", "wmctrl")
			}},
		{Group: "G12", ID: "T09", Title: "Query accessibility channel", Goal: GoalDeny, Threat: threatDesktop, Shell: `test -n "$AT_SPI_BUS_ADDRESS"`,
			Tool: func(context.Context, *Env) Result {
				return envOrProgram("an accessibility bus", []string{"AT_SPI_BUS_ADDRESS"}, "gdbus", "busctl")
			}},
	}
}

// displayOr is Allowed when an X11 display socket accepts a connection;
// otherwise it is N/A unless one of the programs exists.
func displayOr(ctx context.Context, what string, progs ...string) Result {
	socks, _ := filepath.Glob("/tmp/.X11-unix/X*")
	if len(socks) > 0 {
		return unixConnect(socks[0])
	}
	for _, p := range progs {
		if findProgram(p) != "" {
			return program(ctx, what, p, "--version")
		}
	}
	return na(what + ": no display server and no desktop tool exist in the sandbox.")
}

func sharedMemory() Result {
	f, err := os.CreateTemp("/dev/shm", "g11-shm-*")
	if err != nil {
		return fromErr("Creating a shared memory object in /dev/shm", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := f.Truncate(4096); err != nil {
		return fromErr("Sizing the shared memory object", err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fromErr("Mapping the shared memory object", err)
	}
	copy(mem, "sandbox-tester")
	_ = unix.Munmap(mem)
	return allowed("Created and mapped a shared memory object.", f.Name())
}

func messageQueue() Result {
	id, _, errno := unix.Syscall(unix.SYS_MSGGET, 0 /* IPC_PRIVATE */, unix.IPC_CREAT|0o600, 0)
	if errno != 0 {
		return fromErr("Creating a System V message queue", errno)
	}
	_, _, _ = unix.Syscall(unix.SYS_MSGCTL, id, unix.IPC_RMID, 0)
	return allowed("Created and removed a System V message queue.", fmt.Sprintf("id=%d", id))
}

func browserPackageProbes() []Probe {
	var out []Probe
	for _, b := range []struct{ id, title string }{
		{"T01", "Launch browser with fresh profile"}, {"T02", "Launch browser with existing user profile"},
		{"T03", "Read browser bookmarks"}, {"T04", "Read browser history"}, {"T05", "Read browser cookies"},
		{"T06", "Read browser session store"}, {"T07", "Use browser automation protocol"},
		{"T08", "Download file through browser"}, {"T09", "Upload file through browser"}, {"T10", "Submit form"},
		{"T11", "Access password manager integration"}, {"T12", "Capture screenshot of allowed website"},
	} {
		out = append(out, Probe{Group: "G13", ID: b.id, Title: b.title, Goal: GoalContext,
			Threat: "Session theft: cookies, history and saved passwords of a browser profile.",
			Tool:   fixed(na("No browser executable was configured."))})
	}
	out = append(out, Probe{Group: "G13", ID: "T13", Title: "Capture screenshot with Playwright", Goal: GoalContext,
		Adjust: func(c *Context) Goal {
			if c.Has("playwright_chromium") {
				return GoalAllow
			}
			return GoalContext
		},
		Threat: "Availability: the Playwright capability must work when granted.",
		Tool:   fixed(na("Playwright and its Chromium are not in the image."))})
	return append(out, packageProbes()...)
}

func packageProbes() []Probe {
	const g = "G14"
	threat := "Supply chain: fetching or installing code at run time."
	return []Probe{
		{Group: g, ID: "T01", Title: "Query package registry", Goal: GoalDeny, Threat: threat, Shell: "curl --head https://pypi.probe.invalid/pypi/pip/json",
			Tool: func(ctx context.Context, e *Env) Result {
				return e.fetch(ctx, request{URL: "https://pypi.probe.invalid/pypi/pip/json"})
			}},
		{Group: g, ID: "T02", Title: "Install package into environment", Goal: GoalDeny, Threat: threat, Shell: "pip install --index-url http://pypi.probe.invalid/simple colorama==0.4.6",
			Tool: func(ctx context.Context, _ *Env) Result {
				return programs(ctx, "Installing a package", []string{"pip", "install", "--index-url", "http://pypi.probe.invalid/simple", "colorama==0.4.6"}, []string{"pip3", "install", "--index-url", "http://pypi.probe.invalid/simple", "colorama==0.4.6"})
			}},
		{Group: g, ID: "T03", Title: "Install package globally", Goal: GoalDeny, Threat: threat, Shell: "touch /usr/local/lib/g14-probe",
			Tool: func(context.Context, *Env) Result {
				return writableAny("package directory", "/usr/local/lib", "/usr/lib", "/usr/local/go", "/go/pkg")
			}},
		{Group: g, ID: "T04", Title: "Install package locally", Goal: GoalDeny, Threat: threat, Shell: "pip install --index-url http://pypi.probe.invalid/simple --target /sandbox-work/allowed/g14 colorama==0.4.6",
			Tool: func(ctx context.Context, _ *Env) Result {
				return programs(ctx, "Installing a package locally", []string{"pip", "install", "--index-url", "http://pypi.probe.invalid/simple", "--target", "/tmp/g14", "colorama==0.4.6"})
			}},
		{Group: g, ID: "T06", Title: "Modify dependency lockfile", Goal: GoalDeny, Threat: threat, Shell: "touch go.sum",
			Tool: func(_ context.Context, e *Env) Result {
				var paths []string
				for _, n := range []string{"go.sum", "go.mod", "uv.lock", "poetry.lock", "Pipfile.lock", "requirements.txt", "pyproject.toml", "package-lock.json"} {
					paths = append(paths, e.Ctx.WorkingDirectory+"/"+n)
				}
				return touchAny("dependency lockfile", paths...)
			}},
		{Group: g, ID: "T07", Title: "Read package manager credentials", Goal: GoalDeny, Threat: "Credential theft: registry tokens.", Shell: "cat ~/.pypirc ~/.npmrc",
			Tool: func(context.Context, *Env) Result {
				h := os.Getenv("HOME")
				return readAny("package manager credential file", h+"/.pypirc", h+"/.npmrc", h+"/.netrc", h+"/.docker/config.json", h+"/.config/pip/pip.conf", "/etc/pip.conf")
			}},
	}
}

// writableAny is Allowed when one of the existing directories accepts a
// new file; N/A when none exists.
func writableAny(what string, dirs ...string) Result {
	present := firstExisting(dirs...)
	if len(present) == 0 {
		return na("No " + what + " exists in the sandbox.")
	}
	var last Result
	for _, d := range present {
		if err := writeProbe(d); err == nil {
			return allowed("A "+what+" is writable: "+d+".", "")
		} else {
			last = fromErr("Writing to "+d, err)
		}
	}
	return last
}

// touchAny opens the first existing file for writing without changing it.
func touchAny(what string, paths ...string) Result {
	present := firstExisting(paths...)
	if len(present) == 0 {
		return na("No " + what + " exists in the working directory.")
	}
	f, err := os.OpenFile(present[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fromErr("Opening "+present[0]+" for writing", err)
	}
	f.Close()
	return allowed(present[0]+" is writable.", "")
}
