//go:build linux

package harden

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
)

// cgoSyscalls are what glibc adds when the test binary is built with cgo
// (the release binary never is); tkill is psx signalling threads in C.
var cgoSyscalls = []string{"brk", "mprotect", "rseq", "set_robust_list", "set_tid_address", "clone3", "access", "tkill"}

const envAllowList = "HARDEN_TEST_ALLOWLIST" // JSON Policy; child installs the allow-list, applies, runs the workload

// allowListChild is the child side of TestRoleSyscallsSuffice: a filter that
// kills the process on any syscall outside RoleSyscalls, then Apply, then
// the workload. Surviving proves the list is enough.
func allowListChild(raw string) int {
	p, err := ParsePolicy([]byte(raw))
	if err != nil {
		return fail("policy: %v", err)
	}
	info, err := arch.GetInfo("")
	if err != nil {
		return fail("arch: %v", err)
	}
	names := append(append([]string{}, RoleSyscalls...), cgoSyscalls...)
	var known []string
	for _, n := range names {
		if _, ok := info.SyscallNames[n]; ok {
			known = append(known, n)
		}
	}
	filter := seccompbpf.Filter{NoNewPrivs: true, Flag: seccompbpf.FilterFlagTSync, Policy: seccompbpf.Policy{
		DefaultAction: seccompbpf.ActionKillProcess,
		Syscalls:      []seccompbpf.SyscallGroup{{Names: known, Action: seccompbpf.ActionAllow}},
	}}
	if err := seccompbpf.LoadFilter(filter); err != nil {
		return fail("allow-list filter: %v", err)
	}
	if _, err := Apply(*p); err != nil {
		return fail("apply: %v", err)
	}
	ports := p.Landlock.BindTCP
	if err := roleWorkload(p.Landlock.ReadWriteDirs[0], hostPort(ports[0]), hostPort(ports[1])); err != nil {
		return fail("workload: %v", err)
	}
	return 0
}

func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	return 1
}

// TestRoleSyscallsSuffice runs Apply and the role workload under a filter
// that allows only RoleSyscalls and kills the process on anything else.
func TestRoleSyscallsSuffice(t *testing.T) {
	f := newFixture(t)
	p := f.policy
	// The workload serves HTTP and TLS on two ports and calls itself; it
	// reads /etc/hosts for the name lookup.
	ports := []uint16{freePort(t), freePort(t)}
	p.Landlock.BindTCP, p.Landlock.ConnectTCP = ports, ports
	p.Landlock.ReadOnlyDirs = append(p.Landlock.ReadOnlyDirs, "/etc")
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envAllowList+"="+string(raw))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("workload under the RoleSyscalls allow-list: %v (SIGSYS means a needed syscall is missing)\n%s", err, stderr.String())
	}
}
