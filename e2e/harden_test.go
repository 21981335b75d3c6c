//go:build docker

package e2e

// Hardening in a real container: the static binary in a FROM-scratch image,
// started with exactly the Docker options the spec resolves for the agent
// (cap-drop ALL, no-new-privileges, read-only root, noexec tmpfs, the
// spec's seccomp profile, limits), runs the hidden harden-selftest: it
// applies the agent's harden policy, then attempts what the agent needs and
// what it must never do. Everything runs with --network none.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

const hdLabel = "mcpsidecar.test=1"

func TestHardenInContainer(t *testing.T) {
	NeedDocker(t)
	prof := hdProfile(t)
	image := hdImage(t, BinaryWithTestCommands(t))
	for _, role := range prof.Roles {
		t.Run(role, func(t *testing.T) {
			c := prof.Containers[role]
			out := t.TempDir()
			if err := os.Chmod(out, 0o777); err != nil { // the container user is not us
				t.Fatal(err)
			}
			checks := hdRoleChecks(c.Harden)
			stdout, stderr, err := hdRunSelftest(t, image, c, prof.SeccompProfile, out, checks)
			if err != nil {
				t.Fatalf("harden-selftest: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
			}
			var res struct {
				Results []harden.CheckResult `json:"results"`
			}
			if err := json.Unmarshal(stdout, &res); err != nil {
				t.Fatalf("decoding self-test output %q: %v", stdout, err)
			}
			if len(res.Results) != len(checks) {
				t.Fatalf("got %d results, want %d", len(res.Results), len(checks))
			}
			for _, r := range res.Results {
				if !r.Pass {
					t.Errorf("%s: %s %s: got %s (%s), want %s", r.Name, r.Action, r.Arg, r.Got, r.Error, r.Want)
				}
			}
			hdCheckReport(t, filepath.Join(out, harden.ReportFile), c.Harden)
		})
	}
}

// TestHardenOuterSeccompProfile measures the container's own layers with
// nothing applied inside (--outer-only): under the spec's seccomp profile
// and cap-drop ALL, ptrace, user namespaces, mount, keyctl and io_uring are
// refused; the unconfined control shows the profile is what refuses most
// of them (mount stays refused there for want of CAP_SYS_ADMIN).
func TestHardenOuterSeccompProfile(t *testing.T) {
	NeedDocker(t)
	prof := hdProfile(t)
	agent := prof.Containers[spec.RoleAgent]
	image := hdImage(t, BinaryWithTestCommands(t))
	actions := []string{harden.ActPtrace, harden.ActUnshareUser, harden.ActMount, harden.ActKeyctl, harden.ActIOUring,
		harden.ActChmodSetuid, harden.ActFchmodSetuid, harden.ActCreateSetuid, harden.ActTFOSendto, harden.ActTFOConnect}
	args := map[string]string{
		harden.ActChmodSetuid: spec.OutputDir, harden.ActFchmodSetuid: spec.OutputDir,
		harden.ActCreateSetuid: spec.OutputDir, harden.ActTFOSendto: "127.0.0.1:9",
	}
	// Unconfined, the setuid bits are set, and TCP Fast Open fails for
	// want of the client sysctl (EOPNOTSUPP, or ECONNREFUSED from the
	// closed port): "error", not "denied".
	tests := []struct {
		name    string
		seccomp []byte // nil: unconfined
		want    map[string]string
	}{
		{"spec profile", prof.SeccompProfile, map[string]string{
			// This format cannot refuse setsockopt safely; the sysctl does.
			harden.ActTFOConnect: harden.OutcomeError,
		}},
		{"unconfined control", nil, map[string]string{
			harden.ActPtrace: harden.OutcomeOK, harden.ActUnshareUser: harden.OutcomeOK,
			harden.ActKeyctl: harden.OutcomeOK, harden.ActIOUring: hdIOUringUnconfined(),
			harden.ActChmodSetuid: harden.OutcomeOK, harden.ActFchmodSetuid: harden.OutcomeOK,
			harden.ActCreateSetuid: harden.OutcomeOK, harden.ActTFOSendto: harden.OutcomeError,
			harden.ActTFOConnect: harden.OutcomeError,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var checks []harden.Check
			for _, a := range actions {
				want, ok := tt.want[a]
				if !ok {
					want = harden.OutcomeDenied
				}
				checks = append(checks, harden.Check{Name: a, Action: a, Arg: args[a], Want: want})
			}
			out := t.TempDir()
			os.Chmod(out, 0o777)
			stdout, stderr, err := hdRunSelftest(t, image, agent, tt.seccomp, out, checks, "--outer-only")
			var res struct {
				Results []harden.CheckResult `json:"results"`
			}
			if jerr := json.Unmarshal(stdout, &res); jerr != nil || len(res.Results) != len(checks) {
				t.Fatalf("self-test output %q (%v, %v): %s", stdout, jerr, err, stderr)
			}
			for _, r := range res.Results {
				if !r.Pass {
					t.Errorf("%s: got %s (%s), want %s", r.Name, r.Got, r.Error, r.Want)
				}
			}
		})
	}
}

// hdIOUringUnconfined is what io_uring_setup gives without seccomp: the
// kernel.io_uring_disabled sysctl may refuse it too.
func hdIOUringUnconfined() string {
	b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled")
	if err == nil && strings.TrimSpace(string(b)) != "0" {
		return harden.OutcomeDenied
	}
	return harden.OutcomeOK
}

// hdRoleChecks are a role's needs and the things it must never do, against
// the role's own policy. Nothing listens in the container, so an allowed
// connect ends in ECONNREFUSED ("error"), refused by the peer and not by
// Landlock.
func hdRoleChecks(p harden.Policy) []harden.Check {
	c := func(name, action, arg, want string) harden.Check {
		return harden.Check{Name: name, Action: action, Arg: arg, Want: want}
	}
	checks := []harden.Check{
		c("read /etc/passwd", harden.ActRead, "/etc/passwd", harden.OutcomeOK),
		c("write the output dir", harden.ActWrite, "/sandbox-output/probe.txt", harden.OutcomeOK),
		c("write /tmp", harden.ActWrite, "/tmp/probe.txt", harden.OutcomeOK),
		c("write /sandbox-work", harden.ActWrite, "/sandbox-work/probe.txt", harden.OutcomeOK),
		c("fsize limit gives EFBIG", harden.ActFsize, "/tmp/big", harden.OutcomeEFBIG),
		// /dev/shm is a writable tmpfs Docker adds; only Landlock stops it.
		c("write outside allowed paths", harden.ActWrite, "/dev/shm/x", harden.OutcomeDenied),
		c("read outside allowed paths", harden.ActRead, "/sys/kernel/mm/transparent_hugepage/enabled", harden.OutcomeDenied),
		// The output dir is a bind mount without noexec: only Landlock and
		// the no-spawn filter stand between a written file and execution.
		c("execute a file written to the output dir", harden.ActWriteExec, "/sandbox-output", harden.OutcomeDenied),
		c("execve of the binary itself", harden.ActExec, "/mcpsidecar", harden.OutcomeDenied),
		c("connect a port not in the policy", harden.ActConnect, "127.0.0.1:9", harden.OutcomeDenied),
		c("bind a port not in the policy", harden.ActBind, "127.0.0.1:8080", harden.OutcomeDenied),
		c("unix socket", harden.ActUnixSocket, "", harden.OutcomeDenied),
		c("socketpair", harden.ActSocketpair, "", harden.OutcomeDenied),
	}
	for _, a := range []string{harden.ActPtrace, harden.ActUnshareUser, harden.ActMount, harden.ActKeyctl, harden.ActIOUring} {
		checks = append(checks, c(a, a, "", harden.OutcomeDenied))
	}
	checks = append(checks, hdWaysOutChecks(p)...)
	for _, port := range p.Landlock.ConnectTCP {
		addr := "127.0.0.1:" + strconv.Itoa(int(port))
		checks = append(checks, c("connect allowed "+addr, harden.ActConnect, addr, harden.OutcomeError))
	}
	for _, port := range p.Landlock.BindTCP {
		addr := "127.0.0.1:" + strconv.Itoa(int(port))
		checks = append(checks, c("bind allowed "+addr, harden.ActBind, addr, harden.OutcomeOK))
	}
	return checks
}

// hdWaysOutChecks are issue 12's ways out: TCP Fast Open past the connect
// rule, setuid files in the output directory (a bind mount the host
// keeps), raw, packet and ICMP sockets for every role; listening, UDP and
// netlink as the role's policy says.
func hdWaysOutChecks(p harden.Policy) []harden.Check {
	c := func(name, action, arg, want string) harden.Check {
		return harden.Check{Name: name, Action: action, Arg: arg, Want: want}
	}
	refusedIf := func(refused bool) string {
		if refused {
			return harden.OutcomeDenied
		}
		return harden.OutcomeOK
	}
	checks := []harden.Check{
		c("TCP Fast Open to a port not in the policy", harden.ActTFOSendto, "127.0.0.1:9", harden.OutcomeDenied),
		c("setsockopt TCP_FASTOPEN_CONNECT", harden.ActTFOConnect, "", harden.OutcomeDenied),
		c("raw socket", harden.ActRawSocket, "", harden.OutcomeDenied),
		c("packet socket", harden.ActPacketSocket, "", harden.OutcomeDenied),
		c("ICMP ping socket", harden.ActPingSocket, "", harden.OutcomeDenied),
		c("listen without bind", harden.ActListenUnbound, "", refusedIf(p.NoListen)),
		c("UDP socket", harden.ActUDPSocket, "", refusedIf(p.NoUDP)),
		c("netlink socket", harden.ActNetlink, "", refusedIf(p.NoNetlink)),
	}
	for _, a := range []string{harden.ActChmodSetuid, harden.ActChmodSetgid, harden.ActFchmodSetuid,
		harden.ActFchmodat2Setuid, harden.ActCreateSetuid, harden.ActMknodSetuid} {
		checks = append(checks, c(a+" in the output dir", a, spec.OutputDir, harden.OutcomeDenied))
	}
	return checks
}

func hdCheckReport(t *testing.T, path string, p harden.Policy) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the role did not write its report: %v", err)
	}
	var rep harden.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Role != p.Role || !rep.NoNewPrivs || !rep.SIGXFSZIgnored || rep.EnforcedLandlockABI < 1 {
		t.Errorf("report: %+v", rep)
	}
	for _, l := range rep.Layers {
		if l.Required && !l.Enforced {
			t.Errorf("required layer %s not enforced: %+v", l.Name, l)
		}
	}
	if rep.KernelLandlockABI >= 4 && len(rep.Degradations) > 0 {
		t.Errorf("degradations on a kernel with ABI %d: %v", rep.KernelLandlockABI, rep.Degradations)
	}
	if rep.GoMaxProcs != p.GoMaxProcs || rep.GoMemLimitBytes != p.GoMemLimitBytes {
		t.Errorf("runtime limits: got %d/%d, want %d/%d", rep.GoMaxProcs, rep.GoMemLimitBytes, p.GoMaxProcs, p.GoMemLimitBytes)
	}
	t.Logf("kernel Landlock ABI %d, enforced %d, %s took %dµs", rep.KernelLandlockABI, rep.EnforcedLandlockABI, "Apply", rep.DurationMicros)
}

// hdProfile resolves the default spec (network, mcp_client, openai_agents).
func hdProfile(t *testing.T) *spec.Profile {
	t.Helper()
	s, err := spec.Default()
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Resolve(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Containers[spec.RoleAgent]; !ok {
		t.Fatal("resolved profile has no agent container")
	}
	return p
}

// hdRunArgs turns the spec's container into docker run flags (network none).
func hdRunArgs(c spec.Container, seccompFile, out string) []string {
	args := []string{"--label", hdLabel, "--network", "none", "--user", c.User, "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges:true", "--security-opt", "seccomp=" + seccompFile,
		"--memory", strconv.FormatInt(c.Memory, 10), "--memory-swap", strconv.FormatInt(c.MemorySwap, 10),
		"--cpus", fmt.Sprintf("%.2f", float64(c.NanoCPUs)/1e9), "--pids-limit", strconv.FormatInt(c.PidsLimit, 10),
		"--cgroupns", "private", "-v", out + ":" + spec.OutputDir}
	if c.ReadonlyRootfs {
		args = append(args, "--read-only")
	}
	for _, add := range c.CapAdd {
		args = append(args, "--cap-add", add)
	}
	for path, opts := range c.Tmpfs {
		args = append(args, "--tmpfs", path+":"+opts)
	}
	for _, u := range c.Ulimits {
		args = append(args, "--ulimit", fmt.Sprintf("%s=%d:%d", u.Name, u.Soft, u.Hard))
	}
	for k, v := range c.Sysctls {
		args = append(args, "--sysctl", k+"="+v)
	}
	for k, v := range c.Env {
		args = append(args, "-e", k+"="+v)
	}
	return args
}

// hdRunSelftest runs harden-selftest in a container configured as c; a
// nil seccomp profile runs it unconfined.
func hdRunSelftest(t *testing.T, image string, c spec.Container, seccomp []byte, out string, checks []harden.Check, extra ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	seccompFile := "unconfined"
	if seccomp != nil {
		seccompFile = filepath.Join(t.TempDir(), "seccomp.json")
		if err := os.WriteFile(seccompFile, seccomp, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pol, err := json.Marshal(c.Harden)
	if err != nil {
		t.Fatal(err)
	}
	chk, err := json.Marshal(checks)
	if err != nil {
		t.Fatal(err)
	}
	name := "mcpsidecar-harden-e2e-" + RandHex(6)
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
	args := append([]string{"run", "--name", name}, hdRunArgs(c, seccompFile, out)...)
	args = append(args, "-e", harden.EnvPolicy+"="+string(pol), "-e", "MCPSIDECAR_SELFTEST_CHECKS="+string(chk),
		image, "harden-selftest", "--report-dir", spec.OutputDir)
	args = append(args, extra...)
	var so, se bytes.Buffer
	cmd := exec.Command("docker", args...)
	cmd.Stdout, cmd.Stderr = &so, &se
	err = cmd.Run()
	return so.Bytes(), se.Bytes(), err
}

// hdImage builds a FROM-scratch image holding only the binary and a passwd
// entry for the spec's user; removed at the end of the test.
func hdImage(t *testing.T, bin string) string {
	t.Helper()
	uid, gid, _ := strings.Cut(spec.User, ":")
	return scratchImage(t, "mcpsidecar-harden-e2e:"+RandHex(6),
		"FROM scratch\nLABEL "+hdLabel+"\nCOPY mcpsidecar /mcpsidecar\nCOPY passwd /etc/passwd\nCOPY group /etc/group\nUSER "+spec.User+"\nENTRYPOINT [\"/mcpsidecar\"]\n",
		map[string]string{"mcpsidecar": bin},
		map[string]string{
			"passwd": "sandbox:x:" + uid + ":" + gid + "::/tmp:/nonexistent\n",
			"group":  "sandbox:x:" + gid + ":\n",
		}, hdLabel)
}
