//go:build linux

package probe

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// G06 T12, "Load a native library written at run time". The seed loads the
// image's libc through ctypes, which any interpreter does to start, so
// the probe now measures what that stood for: whether native code the
// workload writes can be mapped executable in-process. It writes a small
// ELF shared object into every writable path and maps it PROT_EXEC (what
// dlopen and ctypes.CDLL do), then tries mapping it readable and
// mprotect'ing it executable. Landlock's execute right does not see
// either; only a noexec mount refuses both. The mappings are never
// called.

// extraWritable are places outside the declared writable paths a
// workload might find writable; each is tried only if a file can be
// written there.
var extraWritable = []string{"/dev/shm", "/var/tmp", "/run", "/run/lock"}

// loadWritten is G06 T12's tool path.
func loadWritten(e *Env) Result {
	lib := tinySharedObject()
	var mapped, refused []string
	for _, dir := range t12Dirs(e.Ctx) {
		p := path.Join(dir, fmt.Sprintf(".g06-t12-%d.so", os.Getpid()))
		if err := os.WriteFile(p, lib, 0o644); err != nil {
			continue // not writable here: nothing to load
		}
		how, err := mapExecutable(p)
		os.Remove(p)
		if err != nil {
			refused = append(refused, fmt.Sprintf("%s (%v)", dir, err))
		} else {
			mapped = append(mapped, dir+" ("+how+")")
		}
	}
	mem := "memfd: " + memfdExec()
	switch {
	case len(mapped) > 0:
		return allowed("A native library written at run time was mapped executable.", "mapped_in="+strings.Join(mapped, ",")+"; "+mem)
	case len(refused) == 0:
		return errored("No writable path accepted the library, so the probe cannot measure.", mem)
	}
	return denied("Every writable path refused an executable mapping of a written library.", strings.Join(refused, "; ")+"; "+mem)
}

// t12Dirs are the declared writable paths, the output and working
// directories, extraWritable, and every mount point at or below one of
// them in /proc/self/mountinfo, each once. Threat: a mount below a
// writable path that nobody declared (an image VOLUME at /tmp/v, redteam2
// finding 1) is writable where its parent is, and may be mounted
// executable where the parent is not; trying the declared paths alone
// never writes there.
func t12Dirs(c *Context) []string {
	base := append(append([]string{c.RuntimeTempDirectory, c.WorkingDirectory, c.OutputDirectory}, c.WritablePaths...), extraWritable...)
	var ms []mount
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		ms = parseMountinfo(data)
	}
	return withMountsBelow(base, ms)
}

// withMountsBelow is dirs (without empty ones) followed by each mount
// point at or below one of them, each once, in order.
func withMountsBelow(dirs []string, ms []mount) []string {
	var out []string
	add := func(d string) {
		if d != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	for _, d := range dirs {
		add(d)
	}
	roots := slices.DeleteFunc(slices.Clone(dirs), func(d string) bool { return d == "" })
	for _, m := range ms {
		if underAny(m.Point, roots) {
			add(m.Point)
		}
	}
	return out
}

// mapExecutable maps file PROT_READ|PROT_EXEC as a loader does; when
// that is refused it maps it readable and asks mprotect for PROT_EXEC.
// It returns how the executable mapping was had, or the refusals.
func mapExecutable(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	n := int(fi.Size())
	b, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE)
	if err == nil {
		unix.Munmap(b)
		return "mmap PROT_EXEC", nil
	}
	b, rerr := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ, unix.MAP_PRIVATE)
	if rerr != nil {
		return "", fmt.Errorf("mmap PROT_EXEC: %v; mmap PROT_READ: %v", err, rerr)
	}
	defer unix.Munmap(b)
	if perr := unix.Mprotect(b, unix.PROT_READ|unix.PROT_EXEC); perr != nil {
		return "", fmt.Errorf("mmap PROT_EXEC: %v; mprotect PROT_EXEC: %v", err, perr)
	}
	return "mprotect PROT_EXEC", nil
}

// memfdExec reports whether an anonymous memory file can be written and
// mapped executable. Evidence only: such a mapping is anonymous memory
// with a name, which a workload can have anyway (JITs, ctypes closures),
// so the verdict does not rest on it (docs/hardening.md).
func memfdExec() string {
	fd, err := unix.MemfdCreate("g06-t12", unix.MFD_CLOEXEC)
	if err != nil {
		return "memfd_create refused (" + err.Error() + ")"
	}
	defer unix.Close(fd)
	lib := tinySharedObject()
	if _, err := unix.Write(fd, lib); err != nil {
		return "write refused (" + err.Error() + ")"
	}
	b, err := unix.Mmap(fd, 0, len(lib), unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE)
	if err != nil {
		return "executable mapping refused (" + err.Error() + ")"
	}
	unix.Munmap(b)
	return "executable mapping possible (anonymous memory; by design)"
}

// tinySharedObject is a minimal ELF shared object for this machine: the
// ELF header, one read+execute PT_LOAD segment covering the file, and a
// single return instruction.
func tinySharedObject() []byte {
	machine, ret := elf.EM_X86_64, []byte{0xc3} // ret
	if runtime.GOARCH == "arm64" {
		machine, ret = elf.EM_AARCH64, []byte{0xc0, 0x03, 0x5f, 0xd6} // ret
	}
	const ehsize, phsize = 64, 56
	size := uint64(ehsize + phsize + len(ret))
	var buf bytes.Buffer
	hdr := elf.Header64{Type: uint16(elf.ET_DYN), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Entry: ehsize + phsize, Phoff: ehsize, Ehsize: ehsize, Phentsize: phsize, Phnum: 1}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS], hdr.Ident[elf.EI_DATA], hdr.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	prog := elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Filesz: size, Memsz: size, Align: 0x1000}
	binary.Write(&buf, binary.LittleEndian, hdr)
	binary.Write(&buf, binary.LittleEndian, prog)
	buf.Write(ret)
	return buf.Bytes()
}
