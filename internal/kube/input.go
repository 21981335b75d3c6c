package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// DefaultNamespacePrefix starts every run namespace's name.
const DefaultNamespacePrefix = "mcpsidecar-"

// SeccompDir is where, under the kubelet's seccomp root
// (/var/lib/kubelet/seccomp by default), the run's seccomp profile must be
// installed on every node that may run its pods, as
// SeccompDir/<SeccompFile>. The Docker backend passes the profile inline;
// Kubernetes can only name a file on the node.
const SeccompDir = "mcpsidecar"

// Input is everything the mapping depends on.
type Input struct {
	// Plan is the Docker backend's plan of the run, after the lifecycle's
	// changes (a user's workload image, for example).
	Plan orchestrate.Plan
	// Profile is the resolved profile the plan was built from: it says
	// which ports each role serves and connects to.
	Profile *spec.Profile
	// RuntimeImage is our image as the cluster names it: the netguard init
	// container runs it, and a user's workload mounts the launcher from it.
	RuntimeImage string
	// NamespacePrefix defaults to DefaultNamespacePrefix.
	NamespacePrefix string
	// Token is appended to the run id in the namespace name, as in the
	// Docker names (two runs started in the same second stay apart).
	Token string
	// RuntimeDefaultSeccomp uses the runtime's default seccomp profile
	// instead of ours, for clusters whose nodes cannot be given a file.
	// It is weaker (it lacks our extra denials) and is meant to be
	// recorded as a degradation by the caller.
	RuntimeDefaultSeccomp bool
	// LauncherPath is the container path of the launcher a user's
	// workload runs under (sandbox.LauncherPath); a read-only mount there
	// becomes an image volume of RuntimeImage.
	LauncherPath string
	// ServiceIPs maps each Service name to its ClusterIP. Only [Pods]
	// needs it: the agent has no resolver, so it is given the addresses in
	// /etc/hosts, and its own rules name them. The addresses are known
	// only once the Services exist, so the client creates them first and
	// maps the pods second.
	ServiceIPs map[string]string
	// HostGatewayIP stands for the Docker host ("host-gateway") when the
	// spec reaches host.docker.internal:PORT: on Kubernetes there is no
	// such host, so the caller names the address that plays its part
	// (a node, a service of the cluster). A plan that needs it without
	// one is refused. The gateway's NetworkPolicy opens it on the
	// gateway's ports.
	HostGatewayIP string
	// GatewayHosts are /etc/hosts entries for the gateway pod only: names
	// the egress gateway resolves to these addresses instead of asking the
	// cluster's DNS (a cluster without DNS, as the test cluster; a name
	// only the user's private resolver knows). The gateway still applies
	// the spec's rules to the name and to the address. No other role gets
	// them: the agent and the sidecar reach nothing but the gateway.
	GatewayHosts []HostEntry
}

// HostEntry is one /etc/hosts name and its address.
type HostEntry struct {
	Name string
	IP   netip.Addr
}

// ParseHostEntry reads NAME=ADDRESS (one host name, one IP address).
func ParseHostEntry(s string) (HostEntry, error) {
	name, addr, ok := strings.Cut(s, "=")
	if !ok {
		return HostEntry{}, fmt.Errorf("%q: want NAME=ADDRESS", s)
	}
	if errs := validation.IsDNS1123Subdomain(strings.ToLower(name)); len(errs) > 0 || name != strings.ToLower(name) {
		return HostEntry{}, fmt.Errorf("%q: %q is not a lower-case host name", s, name)
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil || ip.Zone() != "" || ip.IsUnspecified() {
		return HostEntry{}, fmt.Errorf("%q: %q is not one IP address", s, addr)
	}
	return HostEntry{Name: name, IP: ip.Unmap()}, nil
}

// hostGateway is Docker's name for the host's address in extra hosts.
const hostGateway = "host-gateway"

func (in Input) validate() error {
	switch {
	case in.Profile == nil:
		return fmt.Errorf("mapping run to Kubernetes: no profile")
	case in.Plan.RunID == "":
		return fmt.Errorf("mapping run to Kubernetes: the plan has no run id")
	case in.RuntimeImage == "":
		return fmt.Errorf("mapping run %s to Kubernetes: no runtime image", in.Plan.RunID)
	case len(in.Plan.Containers) == 0:
		return fmt.Errorf("mapping run %s to Kubernetes: the plan has no containers", in.Plan.RunID)
	}
	for _, st := range in.Plan.Containers {
		if _, ok := in.Profile.Containers[st.Role]; !ok {
			return fmt.Errorf("mapping run %s to Kubernetes: role %s is in the plan but not in the profile", in.Plan.RunID, st.Role)
		}
	}
	if in.HostGatewayIP != "" {
		if ip, err := netip.ParseAddr(in.HostGatewayIP); err != nil || ip.IsUnspecified() || ip.Zone() != "" {
			return fmt.Errorf("mapping run %s to Kubernetes: host gateway address %q is not one address", in.Plan.RunID, in.HostGatewayIP)
		}
	}
	for _, h := range in.GatewayHosts {
		if !h.IP.IsValid() || h.Name == "" {
			return fmt.Errorf("mapping run %s to Kubernetes: gateway host entry %q=%v: want a name and an address", in.Plan.RunID, h.Name, h.IP)
		}
	}
	name := in.NamespaceName()
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("mapping run %s to Kubernetes: namespace name %q (prefix %q): %s", in.Plan.RunID, name, in.prefix(), strings.Join(errs, "; "))
	}
	return nil
}

func (in Input) prefix() string {
	if in.NamespacePrefix == "" {
		return DefaultNamespacePrefix
	}
	return in.NamespacePrefix
}

// NamespaceName is the run's namespace: the prefix, the run id and the
// token.
func (in Input) NamespaceName() string {
	n := in.prefix() + in.Plan.RunID
	if in.Token != "" {
		n += "-" + in.Token
	}
	return n
}

// SeccompFile is the file name, under SeccompDir, of a compact seccomp
// profile: its content hash, so a changed profile can never be confused
// with the one a node already holds.
func SeccompFile(profileJSON string) string {
	sum := sha256.Sum256([]byte(profileJSON))
	return "seccomp-" + hex.EncodeToString(sum[:8]) + ".json"
}
