package binarch

import (
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// elfHeader is a 64-bit little-endian ELF header of an executable for
// machine m and OS/ABI abi, with no program or section header.
func elfHeader(m elf.Machine, abi elf.OSABI) []byte {
	b := make([]byte, 64)
	copy(b, elf.ELFMAG)
	b[elf.EI_CLASS], b[elf.EI_DATA], b[elf.EI_VERSION], b[elf.EI_OSABI] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT), byte(abi)
	le := binary.LittleEndian
	le.PutUint16(b[16:], uint16(elf.ET_EXEC))
	le.PutUint16(b[18:], uint16(m))
	le.PutUint32(b[20:], uint32(elf.EV_CURRENT))
	le.PutUint16(b[52:], 64) // e_ehsize
	return b
}

// peHeader is a DOS stub pointing at a PE signature and a COFF header
// for machine m, with no optional header and no section.
func peHeader(m uint16) []byte {
	b := make([]byte, 512) // room for the empty string table pe reads after the header
	copy(b, "MZ")
	binary.LittleEndian.PutUint32(b[0x3c:], 0x40)
	copy(b[0x40:], "PE\x00\x00")
	binary.LittleEndian.PutUint16(b[0x44:], m)
	return b
}

// machoHeader is a 64-bit Mach-O executable header for cpu c, with no
// load command.
func machoHeader(c macho.Cpu) []byte {
	b := make([]byte, 32)
	le := binary.LittleEndian
	le.PutUint32(b[0:], macho.Magic64)
	le.PutUint32(b[4:], uint32(c))
	le.PutUint32(b[12:], uint32(macho.TypeExec))
	return b
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name         string
		data         []byte
		goos, goarch string
		want         string // "" passes; else a part of the error
	}{
		{"linux amd64 on amd64", elfHeader(elf.EM_X86_64, elf.ELFOSABI_NONE), "linux", "amd64", ""},
		{"linux arm64 on arm64", elfHeader(elf.EM_AARCH64, elf.ELFOSABI_LINUX), "linux", "arm64", ""},
		{"linux amd64 on arm64", elfHeader(elf.EM_X86_64, elf.ELFOSABI_NONE), "linux", "arm64",
			"it is an ELF linux/amd64 executable, and the engine runs linux/arm64 containers, which need a Linux ELF executable for arm64"},
		{"linux arm64 on amd64", elfHeader(elf.EM_AARCH64, elf.ELFOSABI_NONE), "linux", "amd64", "ELF linux/arm64 executable, and the engine runs linux/amd64"},
		{"freebsd amd64", elfHeader(elf.EM_X86_64, elf.ELFOSABI_FREEBSD), "linux", "amd64", "ELF ELFOSABI_FREEBSD/amd64"},
		{"windows amd64", peHeader(pe.IMAGE_FILE_MACHINE_AMD64), "linux", "amd64", "PE windows/amd64 executable"},
		{"windows arm64", peHeader(pe.IMAGE_FILE_MACHINE_ARM64), "linux", "arm64", "PE windows/arm64"},
		{"darwin arm64", machoHeader(macho.CpuArm64), "linux", "arm64", "Mach-O darwin/arm64 executable"},
		{"darwin amd64", machoHeader(macho.CpuAmd64), "linux", "amd64", "Mach-O darwin/amd64"},
		{"linux engine of windows", elfHeader(elf.EM_X86_64, elf.ELFOSABI_NONE), "windows", "amd64", "the engine runs windows/amd64 containers"},
		{"a script", []byte("#!/bin/sh\necho hi\n"), "linux", "amd64", "not an ELF, PE or Mach-O executable"},
		{"empty", nil, "linux", "amd64", "not an ELF, PE or Mach-O executable"},
		{"truncated ELF", elfHeader(elf.EM_X86_64, elf.ELFOSABI_NONE)[:20], "linux", "amd64", "reading the ELF header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.data, tc.goos, tc.goarch)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestCheckThisBinary: the test binary itself (a Linux build here) passes
// for its own machine and is refused for the other one.
func TestCheckThisBinary(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Fatalf("this test reads its own executable as a Linux ELF; run it on Linux (GOOS=%s)", runtime.GOOS)
	}
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(data, "linux", runtime.GOARCH); err != nil {
		t.Fatalf("own binary on linux/%s: %v", runtime.GOARCH, err)
	}
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	var me *MismatchError
	if err := Check(data, "linux", other); !errors.As(err, &me) || me.Binary.Arch != runtime.GOARCH {
		t.Fatalf("own binary on linux/%s: got %v, want a mismatch naming %s", other, err, runtime.GOARCH)
	}
}

// TestCheckFile reads an executable's headers where they are: this test
// binary is a Linux ELF of its own machine; a file that is no executable
// is refused.
func TestCheckFile(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" {
		if err := CheckFile(self, "linux", runtime.GOARCH); err != nil {
			t.Errorf("this test binary: %v", err)
		}
	}
	if err := CheckFile(self, "linux", "riscv64"); err == nil {
		t.Error("a binary of another machine passed")
	}
	text := filepath.Join(t.TempDir(), "text")
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckFile(text, "linux", runtime.GOARCH); err == nil {
		t.Error("a script passed")
	}
	if err := CheckFile(filepath.Join(t.TempDir(), "absent"), "linux", runtime.GOARCH); err == nil {
		t.Error("a missing file passed")
	}
}
