//go:build docker

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// concurrentDoctors is how many doctor runs TestConcurrentDoctors starts
// at once: each takes two networks, 64 in all, twice what Docker's
// default address pools hold.
const concurrentDoctors = 32

// TestConcurrentDoctors (issue 19 item 1): 32 doctor runs started at once
// on one engine all pass, each on its own subnets, and leave no container
// or network behind. Before each run took its networks from a pool of
// /28s, the engine's default pools ran out at about 15 runs.
func TestConcurrentDoctors(t *testing.T) {
	NeedDocker(t)
	id := RandHex(6)
	label := "mcpsidecar.e2e=" + id
	CleanupLabelled(t, label)
	// One run first, so the 32 do not race to build the same image.
	warm := filepath.Join(t.TempDir(), "warm")
	if c, code := RunCLI(t, id, nil, "doctor", "--allow-old-engine", "--quiet", "--runs-dir", warm); code != 0 {
		t.Fatalf("warm-up doctor exited %d; stderr:\n%s", code, c.Stderr.String())
	}
	dirs := make([]string, concurrentDoctors)
	clis := make([]*CLI, concurrentDoctors)
	codes := make([]int, concurrentDoctors)
	for i := range dirs {
		dirs[i] = filepath.Join(t.TempDir(), "runs")
		// Two cores serve 96 containers: readiness can take minutes.
		clis[i] = NewCLI(t, id, nil, "doctor", "--allow-old-engine", "--quiet", "--ready-timeout", "5m", "--runs-dir", dirs[i])
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range clis {
		if err := c.Cmd.Start(); err != nil {
			t.Fatalf("starting doctor %d: %v", i, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.Cmd.Wait()
			var ee *exec.ExitError
			switch {
			case err == nil:
			case errors.As(err, &ee):
				codes[i] = ee.ExitCode()
			default:
				codes[i] = -1
				fmt.Fprintf(&c.Stderr, "waiting for the process: %v\n", err)
			}
		}()
	}
	waitOrKill(t, &wg, clis, 20*time.Minute)
	t.Logf("%d concurrent doctors took %s", concurrentDoctors, time.Since(start).Round(time.Millisecond))
	for i, code := range codes {
		if code != 0 {
			t.Errorf("doctor %d exited %d; stderr:\n%s", i, code, hxTail(clis[i].Stderr.String(), 2000))
		}
	}
	RequireNothingLeft(t, label)
	checkDistinctSubnets(t, dirs)
	for _, d := range dirs {
		for _, p := range hxReadMeta(t, hxOnlyRun(t, d)).Phases {
			if !p.OK {
				t.Errorf("%s: phase %s failed: %s", d, p.Name, p.Error)
			}
		}
	}
}

// waitOrKill waits for every run, killing them all after timeout.
func waitOrKill(t *testing.T, wg *sync.WaitGroup, clis []*CLI, timeout time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		for _, c := range clis {
			_ = c.Cmd.Process.Kill()
		}
		<-done
		t.Fatalf("the runs did not finish within %s", timeout)
	}
}

// checkDistinctSubnets: each run's gateway had its addresses on /28s of
// its own, which no other run shared.
func checkDistinctSubnets(t *testing.T, dirs []string) {
	t.Helper()
	owner := map[netip.Prefix]string{}
	for _, d := range dirs {
		runDir := hxOnlyRun(t, d)
		b, err := os.ReadFile(filepath.Join(runDir, "gateway-start-results.json"))
		if err != nil {
			t.Error(err)
			continue
		}
		var res []struct {
			IPs map[string]string `json:"ip_addresses"`
		}
		if err := json.Unmarshal(b, &res); err != nil || len(res) != 1 || len(res[0].IPs) != 2 {
			t.Errorf("%s: gateway-start-results.json: %v, %d results; want one with two addresses", runDir, err, len(res))
			continue
		}
		for network, ip := range res[0].IPs {
			sub, err := netip.ParseAddr(ip)
			if err != nil {
				t.Errorf("%s: %s: address %q: %v", runDir, network, ip, err)
				continue
			}
			p, _ := sub.Prefix(28)
			if prev, taken := owner[p]; taken {
				t.Errorf("%s and %s share the subnet %s", prev, fmt.Sprintf("%s (%s)", runDir, network), p)
			}
			owner[p] = fmt.Sprintf("%s (%s)", runDir, network)
		}
	}
	if len(owner) != 2*len(dirs) {
		t.Errorf("%d distinct /28s among %d runs, want %d", len(owner), len(dirs), 2*len(dirs))
	}
}

// TestSubnetPoolExhausted: when another network holds half of a /27 pool,
// a run cannot get its two /28s; it exits 5 with a hint naming the flag and
// the variable, and leaves nothing (the one network it made is removed).
func TestSubnetPoolExhausted(t *testing.T) {
	NeedDocker(t)
	id := RandHex(6)
	label := "mcpsidecar.e2e=" + id
	CleanupLabelled(t, label)
	docker(t, "network", "create", "--internal", "--label", TestLabel, "--label", label,
		"--subnet", "10.213.250.16/28", "mcpsidecar-e2e-"+id)
	runsDir := filepath.Join(t.TempDir(), "runs")
	c, code := RunCLI(t, id, nil, "doctor", "--allow-old-engine", "--quiet", "--subnet-pool", "10.213.250.0/27", "--runs-dir", runsDir)
	if code != 5 {
		t.Fatalf("doctor exited %d, want 5; stderr:\n%s", code, c.Stderr.String())
	}
	for _, want := range []string{"no free subnet left in the pool", "--subnet-pool", "MCPSIDECAR_SUBNET_POOL"} {
		if !strings.Contains(c.Stderr.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, c.Stderr.String())
		}
	}
	cs, ns := Leftovers(t, label)
	if len(cs) != 0 || len(ns) != 1 {
		t.Errorf("left behind: containers %v, networks %v; want only the test's own network", cs, ns)
	}
}
