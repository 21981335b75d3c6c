package kube

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// dnsPort is the port of DNS. The gateway's resolver needs it (the
// profile lists it among the gateway's TCP connect ports, for truncated
// answers); it is the one port the NetworkPolicy opens towards the
// cluster's DNS rather than the public internet.
const dnsPort = 53

// Cluster DNS as kube-dns and CoreDNS deployments label it.
var (
	dnsNamespace = map[string]string{"kubernetes.io/metadata.name": "kube-system"}
	dnsPods      = map[string]string{"k8s-app": "kube-dns"}
)

// nonPublic are the ranges the gateway refuses unless allowed_ip_addresses
// names them (netpolicy.NonPublicPrefixes, the Squid engine's deny list
// too), as ipBlock exceptions of cidr: the NetworkPolicy leaves them out
// of "public", so a cluster that enforces policies refuses them too. The
// threat: the gateway reaching the cluster's own services, nodes and the
// cloud metadata address. IPv4-mapped IPv6 cannot be written in an
// ipBlock; such an address is the IPv4 one, covered by the IPv4 block.
func nonPublic(cidr netip.Prefix) []string {
	var out []string
	for _, p := range netpolicy.NonPublicPrefixes() {
		if p.Addr().Is4() != cidr.Addr().Is4() || p.Addr().Is4In6() || p == cidr {
			continue
		}
		out = append(out, p.String())
	}
	return out
}

// edge is one connection the plan allows: From reaches To (by its alias
// Via) on Ports.
type edge struct {
	From, To, Via string
	Ports         []int32
}

// serves are the TCP ports role listens on (its Landlock bind rules).
func (in Input) serves(role string) []int32 {
	return ports(in.Profile.Containers[role].Harden.Landlock.BindTCP)
}

// connects are the TCP ports role may connect to.
func (in Input) connects(role string) []int32 {
	return ports(in.Profile.Containers[role].Harden.Landlock.ConnectTCP)
}

func ports(p []uint16) []int32 {
	out := make([]int32, 0, len(p))
	for _, v := range p {
		out = append(out, int32(v))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// edges are the plan's peer connections: each role reaches the roles in
// its Hosts, on the ports it connects to that the peer serves (agent →
// sidecar 8000, gateway 3128 and 3129 when the gateway holds credentials;
// sidecar → gateway 3128).
func (in Input) edges() []edge {
	var out []edge
	for _, st := range in.Plan.Containers {
		for _, h := range st.Hosts {
			p := intersect(in.connects(st.Role), in.serves(h.Role))
			if len(p) > 0 {
				out = append(out, edge{From: st.Role, To: h.Role, Via: h.Name, Ports: p})
			}
		}
	}
	return out
}

func intersect(a, b []int32) []int32 {
	var out []int32
	for _, v := range a {
		if slices.Contains(b, v) {
			out = append(out, v)
		}
	}
	return out
}

// aliases are the Service names of role: its aliases on the internal
// network.
func aliases(st orchestrate.Step) []string {
	var out []string
	for _, a := range st.Spec.Networks {
		out = append(out, a.Aliases...)
	}
	return out
}

// Services are one ClusterIP Service per alias of a role on the internal
// network (egress-gateway, mcp-sidecar), each with the ports the role
// serves, selecting the role's pod.
func Services(in Input) ([]*corev1.Service, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	var out []*corev1.Service
	for _, st := range in.Plan.Containers {
		for _, name := range aliases(st) {
			svc := &corev1.Service{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
				ObjectMeta: in.meta(name, st.Role),
				Spec: corev1.ServiceSpec{
					Type:     corev1.ServiceTypeClusterIP,
					Selector: in.selector(st.Role),
				},
			}
			for _, p := range in.serves(st.Role) {
				svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
					Name: fmt.Sprintf("tcp-%d", p), Protocol: corev1.ProtocolTCP, Port: p, TargetPort: intstr.FromInt32(p)})
			}
			if len(svc.Spec.Ports) == 0 {
				return nil, fmt.Errorf("mapping run %s: role %s has alias %s but serves no port", in.Plan.RunID, st.Role, name)
			}
			out = append(out, svc)
		}
	}
	return out, nil
}

// Policies are the run's NetworkPolicies: deny everything in and out of
// every pod of the namespace, then one policy per role opening exactly
// its edges (ingress from the roles that reach it, egress to the roles it
// reaches) and, for the role on the egress network, the public internet
// on its connect ports and the cluster's DNS.
func Policies(in Input) ([]*networkingv1.NetworkPolicy, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	deny := in.policy("default-deny", "", metav1.LabelSelector{})
	out := []*networkingv1.NetworkPolicy{deny}
	edges := in.edges()
	for _, st := range in.Plan.Containers {
		p := in.policy(st.Role, st.Role, metav1.LabelSelector{MatchLabels: in.selector(st.Role)})
		for _, e := range edges {
			if e.To == st.Role {
				p.Spec.Ingress = append(p.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{
					From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: in.selector(e.From)}}},
					Ports: tcpPorts(e.Ports)})
			}
			if e.From == st.Role {
				p.Spec.Egress = append(p.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
					To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: in.selector(e.To)}}},
					Ports: tcpPorts(e.Ports)})
			}
		}
		if slices.Contains(in.Profile.Containers[st.Role].Networks, spec.NetEgress) {
			p.Spec.Egress = append(p.Spec.Egress, in.outside(st.Role)...)
		}
		if len(p.Spec.Ingress)+len(p.Spec.Egress) > 0 {
			out = append(out, p)
		}
	}
	return out, nil
}

func (in Input) policy(name, role string, sel metav1.LabelSelector) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: in.meta(name, role),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: sel,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

// outside is the egress role's way out: DNS to the cluster's resolver,
// and its other connect ports to public addresses and to the addresses
// allowed_ip_addresses names.
func (in Input) outside(role string) []networkingv1.NetworkPolicyEgressRule {
	var out []networkingv1.NetworkPolicyEgressRule
	var public []int32
	for _, p := range in.connects(role) {
		if p != dnsPort {
			public = append(public, p)
			continue
		}
		dns := intstr.FromInt32(dnsPort)
		udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
		out = append(out, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: dnsNamespace},
				PodSelector:       &metav1.LabelSelector{MatchLabels: dnsPods}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}},
		})
	}
	if len(public) == 0 {
		return out
	}
	var peers []networkingv1.NetworkPolicyPeer
	for _, cidr := range []string{"0.0.0.0/0", "::/0"} {
		peers = append(peers, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: nonPublic(netip.MustParsePrefix(cidr))}})
	}
	if in.HostGatewayIP != "" {
		ip := netip.MustParseAddr(in.HostGatewayIP) // checked by validate
		peers = append(peers, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(ip, ip.BitLen()).String()}})
	}
	out = append(out, networkingv1.NetworkPolicyEgressRule{To: peers, Ports: tcpPorts(public)})
	return append(out, in.allowedIPs()...)
}

// allowedIPs are the allowed_ip_addresses entries: a network or address
// without a port on the gateway's default ports, an address with a port
// on that port alone (as the gateway itself allows them).
func (in Input) allowedIPs() []networkingv1.NetworkPolicyEgressRule {
	if in.Profile.Gateway == nil {
		return nil
	}
	var out []networkingv1.NetworkPolicyEgressRule
	var plain []networkingv1.NetworkPolicyPeer
	for _, e := range in.Profile.Gateway.AllowedIPs {
		r, err := netpolicy.ParseIPRule(e)
		if err != nil {
			continue // the profile holds only entries that parsed
		}
		peer := networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: r.Prefix.String()}}
		if r.Port == 0 {
			plain = append(plain, peer)
			continue
		}
		out = append(out, networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{peer}, Ports: tcpPorts([]int32{int32(r.Port)})})
	}
	if len(plain) > 0 {
		def := ports(append(slices.Clone(in.Profile.Gateway.HTTPPorts), in.Profile.Gateway.ConnectPorts...))
		out = append([]networkingv1.NetworkPolicyEgressRule{{To: plain, Ports: tcpPorts(def)}}, out...)
	}
	return out
}

func tcpPorts(p []int32) []networkingv1.NetworkPolicyPort {
	out := make([]networkingv1.NetworkPolicyPort, 0, len(p))
	for _, v := range p {
		port, tcp := intstr.FromInt32(v), corev1.ProtocolTCP
		out = append(out, networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &port})
	}
	return out
}
