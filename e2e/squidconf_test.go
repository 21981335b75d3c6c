//go:build docker

package e2e

// The squid.conf internal/spec writes, parsed by the real Squid (the
// image scripts/build-squid-image.sh builds from Debian's package) for a
// range of gateway policies. Squid accepts a config it partly ignores:
// it drops a dst entry overlapping another one (it once dropped ::/3, so
// ::1 and NAT64 answers were not denied) and a dstdomain entry inside
// another one, saying so only as a WARNING. Any WARNING, ERROR or FATAL
// line fails the test. The container has no network at all; IPv6 is
// enabled in it, as Squid ignores IPv6 entries (and never warns about
// them) when it finds no working IPv6 loopback.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

var squidConfProblem = regexp.MustCompile(`(?m)^.*\b(WARNING|ERROR|FATAL|Bungled)\b.*$`)

func TestSquidConfParses(t *testing.T) {
	NeedDocker(t)
	id := RandHex(5)
	image := gwSquidImage(t, id)
	dir := t.TempDir()
	cases := []struct {
		name          string
		domains, ips  []string
		http, connect []uint16
	}{
		{name: "seed domains", domains: []string{".example.com", ".gov.uk", ".microsoft.com", ".openai.com"}},
		{name: "overlapping rules", domains: []string{"*.allowed.test", "api.allowed.test", "allowed.test", "xn--bcher-kva.example"},
			ips: []string{"172.18.0.0/16", "172.18.3.0/24", "10.1.2.3", "fd00:1::/64", "2001:db8::1", "::/32", "8.8.8.0/24"}},
		{name: "ips only", ips: []string{"192.168.7.0/24", "[2001:db8::7]"}},
		{name: "nothing allowed"},
		{name: "connect port outside http ports", domains: []string{".allowed.test"}, http: []uint16{80}, connect: []uint16{443, 8443}},
		{name: "no ports", domains: []string{".allowed.test"}, http: []uint16{}, connect: []uint16{}},
		{name: "entries with ports", domains: []string{".allowed.test", "models.lan.test:11434", "api.allowed.test:8080", "host.docker.internal:11434"},
			ips: []string{"192.168.1.20:8000", "[fd00::5]:8080", "10.1.0.0/16"}},
		{name: "only entries with ports", domains: []string{"models.lan.test:11434"}, ips: []string{"192.0.2.7:8000"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := spec.GatewayConfig(c.domains, c.ips)
			if err != nil {
				t.Fatal(err)
			}
			if c.http != nil {
				cfg.HTTPPorts, cfg.ConnectPorts = c.http, c.connect
			}
			out := squidParse(t, image, filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".conf"), cfg)
			if !strings.Contains(out, "Processing: http_access deny all") {
				t.Fatalf("squid did not read the generated config:\n%s", out)
			}
			if bad := squidConfProblem.FindAllString(out, -1); len(bad) > 0 {
				t.Errorf("squid -k parse complained:\n%s", strings.Join(bad, "\n"))
			}
		})
	}
}

// squidParse runs `squid -k parse` on the squid.conf for cfg in a
// container without a network and returns its output.
func squidParse(t *testing.T, image, conf string, cfg netpolicy.Config) string {
	t.Helper()
	if err := os.WriteFile(conf, []byte(spec.SquidConf(cfg)), 0o644); err != nil {
		t.Fatal(err)
	}
	name := "mcpsidecar-e2e-" + RandHex(5) + "-squid-parse"
	t.Cleanup(func() { dockerErr("rm", "-f", name) })
	args := []string{"run", "--name", name, "--label", "mcpsidecar.test=1", "--network", "none",
		"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", egress.SquidUser,
		"--sysctl", "net.ipv6.conf.all.disable_ipv6=0", "--sysctl", "net.ipv6.conf.lo.disable_ipv6=0"}
	for path, opts := range egress.SquidTmpfs {
		args = append(args, "--tmpfs", path+":"+opts)
	}
	args = append(args, "-v", conf+":"+egress.SquidConfPath+":ro", "--entrypoint", "/usr/sbin/squid",
		image, "-k", "parse", "-f", egress.SquidConfPath)
	b, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("squid -k parse: %v\n%s", err, b)
	}
	return string(b)
}
