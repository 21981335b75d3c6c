// Package noexec makes the host directories a run bind-mounts writable into
// its containers (each role's output directory) noexec, nosuid and nodev
// before any container starts, and checks, from either side, that a path
// is mounted so.
//
// Threat: Docker cannot mount a bind mount noexec, and Landlock does not
// see mmap. A native library a workload writes to its output directory
// could then be mapped PROT_EXEC and run in-process (ctypes.CDLL, dlopen),
// even though it can never be executed as a program. The kernel refuses
// an executable mapping of any file on a noexec mount (mmap and mprotect
// alike), so the host bind-mounts each output directory onto itself and
// remounts it MS_NOEXEC|MS_NOSUID|MS_NODEV; Docker's bind then copies
// those flags into the container. /tmp and /sandbox-work are noexec tmpfs
// already (internal/spec).
//
// [Mount] needs CAP_SYS_ADMIN in the mount namespace the Docker daemon
// uses; a daemon in another namespace never sees the mount, so the flags
// are checked where they matter: [SeenIn] judges a container's
// mountinfo, which the host reads through a process proven to be the
// container's (dockerx.Process; this package opens no /proc/PID of its
// own), and [Check] is the statfs the launcher runs in the container
// before it executes a workload.
//
// It must not touch a mount it did not make: [Mount] refuses a directory
// that is already a mount point, and [Sweep] unmounts only the
// run-directory mounts below the runs directory it is given whose owner
// no longer holds the lock [Mount] takes.
package noexec
