//go:build linux

package harden

import (
	"errors"
	"os"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Access rights per kind of rule. Writable paths never get EXECUTE (a file
// the workload writes must not run), nor MAKE_SYM (a symlink planted in the
// output directory could redirect a host-side write), nor REFER (so files
// cannot be linked or moved in from elsewhere), nor MAKE_SOCK/MAKE_CHAR/
// MAKE_BLOCK, which no role needs.
const (
	accessRODir  = ll.AccessFSReadFile | ll.AccessFSReadDir
	accessROFile = ll.AccessFSReadFile
	accessRWDir  = ll.AccessFSReadFile | ll.AccessFSReadDir | ll.AccessFSWriteFile | ll.AccessFSTruncate |
		ll.AccessFSRemoveFile | ll.AccessFSRemoveDir | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeFifo
	accessRWFile  = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
	accessExec    = ll.AccessFSReadFile | ll.AccessFSExecute
	accessExecDir = accessRODir | ll.AccessFSExecute

	accessTCP = ll.AccessNetBindTCP | ll.AccessNetConnectTCP
)

// devNull is always granted read-write: without it even opening /dev/null
// for a discarded stream fails (os/exec does that for a nil Stdin).
const devNull = "/dev/null"

// abiConfigs are go-landlock's per-ABI presets, indexed by ABI.
var abiConfigs = []landlock.Config{{}, landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5,
	landlock.V6, landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11}

// landlockPlan is what will be handed to the kernel.
type landlockPlan struct {
	cfg     landlock.Config
	rules   []landlock.Rule
	missing []string // paths in the policy that do not exist here
}

// planLandlock builds the ruleset for a kernel with the given ABI: every
// filesystem right the ABI knows is handled (so anything not granted is
// denied), TCP bind/connect when net is true, and the ABI 6 scopes
// (abstract Unix sockets and signals to processes outside the domain).
func planLandlock(l Landlock, abi int, net bool) landlockPlan {
	abi = min(abi, maxABI)
	base := abiConfigs[abi]
	cfg := landlock.Config{HandledAccessFS: base.HandledAccessFS, Scoped: base.Scoped}
	if net {
		cfg.HandledAccessNet = accessTCP
	}
	var plan landlockPlan
	fs := func(access landlock.AccessFSSet, paths []string) {
		present := plan.present(paths)
		if len(present) > 0 {
			plan.rules = append(plan.rules, landlock.PathAccess(access&cfg.HandledAccessFS, present...))
		}
	}
	fs(accessRODir, l.ReadOnlyDirs)
	fs(accessROFile, l.ReadOnlyFiles)
	fs(accessRWDir, l.ReadWriteDirs)
	fs(accessRWFile, append([]string{devNull}, l.ReadWriteFiles...))
	fs(accessExec, l.ExecFiles)
	fs(accessExecDir, l.ExecDirs)
	if net {
		for _, port := range l.ConnectTCP {
			plan.rules = append(plan.rules, landlock.ConnectTCP(port))
		}
		for _, port := range l.BindTCP {
			plan.rules = append(plan.rules, landlock.BindTCP(port))
		}
	}
	plan.cfg = cfg
	return plan
}

// present keeps the paths that exist and records the others. Skipping a
// missing path only ever grants less: nothing can be created there, since
// its parent is not writable either.
func (p *landlockPlan) present(paths []string) []string {
	var out []string
	for _, path := range paths {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			p.missing = append(p.missing, path)
			continue
		}
		out = append(out, path)
	}
	return out
}

// kernelABI reports the Landlock ABI the running kernel enforces (0 when
// Landlock is absent or disabled at boot).
func kernelABI() (int, error) {
	v, err := ll.LandlockGetABIVersion()
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return 0, nil // no Landlock in this kernel, or disabled at boot
	}
	return v, err
}

// restrictLandlock enforces the plan on every thread (go-landlock uses psx
// or AllThreadsSyscall below ABI 8, the kernel's TSYNC flag from ABI 8).
func restrictLandlock(plan landlockPlan) error {
	return plan.cfg.Restrict(plan.rules...)
}

// allThreadsNoNewPrivs sets no_new_privs on every thread, so no execve can
// ever gain privileges (setuid binaries, file capabilities).
func allThreadsNoNewPrivs() error {
	return ll.AllThreadsPrctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
}
