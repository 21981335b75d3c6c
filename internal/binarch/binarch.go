// Package binarch reads which system and machine an executable was built
// for (ELF, PE or Mach-O headers) and checks it against an engine's, so
// that a binary that cannot run there is refused before an image is built
// of it, with both named.
//
// It reads bytes it is given; it opens no file and runs nothing.
package binarch

import (
	"bytes"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"errors"
	"fmt"
	"io"
	"os"
)

// Binary is what an executable's header says it runs on, in Go's names
// where it is one Go builds for ("linux", "amd64"), else the header's own.
type Binary struct {
	Format string // "ELF", "PE", "Mach-O"
	OS     string // "linux", "windows", "darwin", or the ELF OS/ABI's name
	Arch   string // "amd64", "arm64", "386", "arm", or the header's machine name
}

func (b Binary) String() string {
	article := "a"
	if b.Format == "ELF" {
		article = "an"
	}
	return fmt.Sprintf("%s %s %s/%s executable", article, b.Format, b.OS, b.Arch)
}

// ErrUnknownFormat: the bytes are no ELF, PE or Mach-O executable.
var ErrUnknownFormat = errors.New("not an ELF, PE or Mach-O executable")

// Of reads the executable's format, system and machine from its header.
func Of(data []byte) (Binary, error) { return of(bytes.NewReader(data)) }

// CheckFile is Check of the executable at path, read where its headers
// are (not whole).
func CheckFile(path, goos, goarch string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := of(f)
	if err != nil {
		return err
	}
	return check(b, goos, goarch)
}

func of(r io.ReaderAt) (Binary, error) {
	data := make([]byte, 4)
	if n, _ := r.ReadAt(data, 0); n < len(data) {
		return Binary{}, ErrUnknownFormat
	}
	switch {
	case bytes.HasPrefix(data, []byte(elf.ELFMAG)):
		f, err := elf.NewFile(r)
		if err != nil {
			return Binary{}, fmt.Errorf("reading the ELF header: %w", err)
		}
		return Binary{Format: "ELF", OS: elfOS(f.OSABI), Arch: elfArch(f.Machine)}, nil
	case bytes.HasPrefix(data, []byte("MZ")):
		f, err := pe.NewFile(r)
		if err != nil {
			return Binary{}, fmt.Errorf("reading the PE header: %w", err)
		}
		return Binary{Format: "PE", OS: "windows", Arch: peArch(f.Machine)}, nil
	}
	if f, err := macho.NewFile(r); err == nil {
		return Binary{Format: "Mach-O", OS: "darwin", Arch: machoArch(f.Cpu)}, nil
	}
	if _, err := macho.NewFatFile(r); err == nil {
		return Binary{Format: "Mach-O", OS: "darwin", Arch: "universal"}, nil
	}
	return Binary{}, ErrUnknownFormat
}

// Check says why the executable cannot run on an engine of goos/goarch
// (Go's names, as the engine's /version reports them), or nil when it
// can: a Linux ELF of that machine.
func Check(data []byte, goos, goarch string) error {
	b, err := Of(data)
	if err != nil {
		return err
	}
	return check(b, goos, goarch)
}

func check(b Binary, goos, goarch string) error {
	if b.Format != "ELF" || b.OS != "linux" || b.Arch != goarch || goos != "linux" {
		return &MismatchError{Binary: b, EngineOS: goos, EngineArch: goarch}
	}
	return nil
}

// MismatchError: the executable is not one the engine's machine runs.
type MismatchError struct {
	Binary               Binary
	EngineOS, EngineArch string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("it is %s, and the engine runs %s/%s containers, which need a Linux ELF executable for %s",
		e.Binary, e.EngineOS, e.EngineArch, e.EngineArch)
}

func elfOS(abi elf.OSABI) string {
	switch abi {
	case elf.ELFOSABI_NONE, elf.ELFOSABI_LINUX: // Go writes NONE (System V) for Linux
		return "linux"
	}
	return abi.String()
}

func elfArch(m elf.Machine) string {
	switch m {
	case elf.EM_X86_64:
		return "amd64"
	case elf.EM_AARCH64:
		return "arm64"
	case elf.EM_386:
		return "386"
	case elf.EM_ARM:
		return "arm"
	}
	return m.String()
}

func peArch(m uint16) string {
	switch m {
	case pe.IMAGE_FILE_MACHINE_AMD64:
		return "amd64"
	case pe.IMAGE_FILE_MACHINE_ARM64:
		return "arm64"
	case pe.IMAGE_FILE_MACHINE_I386:
		return "386"
	}
	return fmt.Sprintf("machine 0x%x", m)
}

func machoArch(c macho.Cpu) string {
	switch c {
	case macho.CpuAmd64:
		return "amd64"
	case macho.CpuArm64:
		return "arm64"
	}
	return c.String()
}
