//go:build docker

package e2e

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/probe"
)

// anyAddrCanary listens on every address of this host (0.0.0.0) on the ports
// a sandboxed workload may use and counts whatever reaches it. It only
// listens: it sends nothing but what TCP's handshake answers.
type anyAddrCanary struct {
	hits atomic.Int64
	seen chan string
}

func startAnyAddrCanary(t *testing.T) *anyAddrCanary {
	t.Helper()
	c := &anyAddrCanary{seen: make(chan string, 64)}
	for _, port := range []string{"3128", "8000"} {
		ln, err := net.Listen("tcp4", "0.0.0.0:"+port)
		if err != nil {
			t.Fatalf("the host canary needs TCP %s free on this host: %v", port, err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				c.hit("tcp " + port + " from " + conn.RemoteAddr().String())
				conn.Close()
			}
		}()
	}
	pc, err := net.ListenPacket("udp4", "0.0.0.0:53")
	if err != nil {
		t.Fatalf("the host canary needs UDP 53 free on this host: %v", err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			c.hit(fmt.Sprintf("udp 53 from %s: %q", from, buf[:n]))
		}
	}()
	return c
}

func (c *anyAddrCanary) hit(what string) {
	c.hits.Add(1)
	select {
	case c.seen <- what:
	default:
	}
}

// Issue 12: the host must not be reachable from the internal network by
// any protocol. The probe suite (G41) tries the host's addresses on TCP
// 3128/8000, UDP 53 and ICMP from inside a real test-sandbox run, while a
// canary on this host listens on 0.0.0.0: nothing may reach it, the probes
// must pass, the host must hold no address on the internal bridge, and the
// run directory must be safe and owned by the user who ran it.
func TestWaysOutHostUnreachable(t *testing.T) {
	id, runsDir, label := hxSetup(t)
	canary := startAnyAddrCanary(t)
	c, code := RunCLI(t, id, nil, "test-sandbox", "--allow-old-engine", "--runs-dir", runsDir)
	runDir := hxOnlyRun(t, runsDir)
	if code != 0 {
		t.Errorf("test-sandbox exited %d; stderr tail:\n%s", code, hxTail(c.Stderr.String(), 3000))
	}
	RequireNothingLeft(t, label)
	time.Sleep(200 * time.Millisecond) // let a late datagram land
	if n := canary.hits.Load(); n > 0 {
		t.Errorf("the host canary was reached %d time(s) from the sandbox, e.g. %s", n, <-canary.seen)
	}
	wayOutVerdicts(t, runDir)
	hostChecks(t, runDir)
	runDirSafe(t, runDir)
}

// wayOutVerdicts: every G41 probe ran and none found a way out.
func wayOutVerdicts(t *testing.T, runDir string) {
	t.Helper()
	r, err := probe.LoadReport(filepath.Join(runDir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, g := range r.Groups {
		if g.ID != "G41" {
			continue
		}
		for _, c := range g.Capabilities {
			seen++
			if c.Verdict == probe.Violation {
				t.Errorf("%s %s: violation: %s", c.ID, c.Title, c.VerdictReason)
			}
		}
	}
	if seen == 0 {
		t.Error("report.json has no G41 (ways out) probe")
	}
}

// hostChecks: the verdict's structural checks passed (no host address on
// the internal bridge; every role's hardening seen from outside).
func hostChecks(t *testing.T, runDir string) {
	t.Helper()
	var m struct {
		Verdict struct {
			Checks []struct {
				Name   string `json:"name"`
				OK     bool   `json:"ok"`
				Detail string `json:"detail"`
			} `json:"checks"`
		} `json:"verdict"`
	}
	b, err := os.ReadFile(filepath.Join(runDir, "run-metadata.json"))
	if err != nil || json.Unmarshal(b, &m) != nil {
		t.Fatalf("reading run-metadata.json: %v", err)
	}
	want := map[string]bool{"host has no address on": false, "gateway hardening seen from outside": false,
		"sidecar hardening seen from outside": false, "agent hardening seen from outside": false}
	for _, c := range m.Verdict.Checks {
		for k := range want {
			if strings.HasPrefix(c.Name, k) {
				want[k] = true
				if !c.OK || strings.Contains(c.Detail, "not observed") {
					t.Errorf("check %q: ok=%v %s", c.Name, c.OK, c.Detail)
				}
			}
		}
	}
	for k, found := range want {
		if !found {
			t.Errorf("the verdict has no check %q", k)
		}
	}
}

// runDirSafe: no setuid/setgid/sticky bit, nothing group- or
// world-writable, everything owned by the user who ran the harness.
func runDirSafe(t *testing.T, runDir string) {
	t.Helper()
	uid := os.Getuid()
	err := filepath.Walk(runDir, func(p string, info fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		m := info.Mode()
		if m&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 || (m&fs.ModeSymlink == 0 && m.Perm()&0o022 != 0) {
			t.Errorf("%s: mode %v", p, m)
		}
		if owner := int(info.Sys().(*syscall.Stat_t).Uid); owner != uid {
			t.Errorf("%s: owned by uid %d, want %d", p, owner, uid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
