package kube

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/kube/netguard"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/plan"
)

// Pod-level names.
const (
	// ContainerName is the name of the one container of each role's pod.
	ContainerName = "main"
	// NetguardContainer is the agent pod's init container.
	NetguardContainer = "netguard"
	// launcherInImage is the launcher's path inside RuntimeImage.
	launcherInImage = "mcpsidecar"
	outputVolume    = "output"
	launcherVolume  = "launcher"
)

// requestCPU is every container's CPU request; its limit is the plan's.
// Requests equal to the limits (a whole CPU per role) would let one node
// of two cores schedule no run at all; memory requests equal the limits,
// so a run's pods are never the first evicted under memory pressure.
var requestCPU = resource.MustParse("10m")

// netguardLimit bounds the init container: it sends one netlink batch.
var netguardLimit = corev1.ResourceList{
	corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi"),
}

// PodName is the name of role's pod in the run's namespace.
func PodName(role string) string { return role }

// Pods are the run's pods in the plan's start order (gateway, sidecar,
// agent) and the Secrets holding their secret environment values, one
// Secret per role that has any. They need in.ServiceIPs.
func Pods(in Input) ([]*corev1.Pod, []*corev1.Secret, error) {
	if err := in.validate(); err != nil {
		return nil, nil, err
	}
	var pods []*corev1.Pod
	var secrets []*corev1.Secret
	for _, st := range in.Plan.Containers {
		p, sec, err := in.pod(st)
		if err != nil {
			return nil, nil, fmt.Errorf("mapping run %s, role %s: %w", in.Plan.RunID, st.Role, err)
		}
		pods = append(pods, p)
		if sec != nil {
			secrets = append(secrets, sec)
		}
	}
	return pods, secrets, nil
}

func (in Input) pod(st orchestrate.Step) (*corev1.Pod, *corev1.Secret, error) {
	c := st.Spec
	uid, gid, err := parseUser(c.User)
	if err != nil {
		return nil, nil, err
	}
	sc, err := in.securityContext(c, uid, gid)
	if err != nil {
		return nil, nil, err
	}
	vols, mounts, err := in.volumes(st)
	if err != nil {
		return nil, nil, err
	}
	env, sec := in.env(st)
	limits, err := rlimitsEnv(c)
	if err != nil {
		return nil, nil, err
	}
	env = append(env, limits...)
	hosts, err := in.hostAliases(st)
	if err != nil {
		return nil, nil, err
	}
	main := corev1.Container{
		Name: ContainerName, Image: c.Image, Command: c.Entrypoint, Args: c.Cmd, WorkingDir: c.WorkingDir,
		Env: env, VolumeMounts: mounts, Resources: resources(c), SecurityContext: sc,
		ImagePullPolicy: corev1.PullIfNotPresent, ReadinessProbe: readiness(st.Ready),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	grace := int64(c.StopTimeout.Seconds())
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: in.meta(PodName(st.Role), st.Role),
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{main},
			Volumes:                       vols,
			RestartPolicy:                 corev1.RestartPolicyNever,
			ServiceAccountName:            ServiceAccountName,
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			TerminationGracePeriodSeconds: &grace,
			HostAliases:                   hosts,
			SecurityContext:               in.podSecurityContext(c, uid, gid),
		},
	}
	maps.Copy(p.Labels, c.Labels)
	dns(&p.Spec, c)
	if st.Workload {
		ng, err := in.netguard(st, sc)
		if err != nil {
			return nil, nil, err
		}
		p.Spec.InitContainers = []corev1.Container{ng}
	}
	return p, sec, nil
}

func ptr[T any](v T) *T { return &v }

// parseUser reads the plan's "uid:gid". A name cannot be checked against
// runAsNonRoot, so only numbers are accepted.
func parseUser(u string) (int64, int64, error) {
	us, gs, ok := strings.Cut(u, ":")
	uid, err1 := strconv.ParseInt(us, 10, 64)
	gid, err2 := strconv.ParseInt(gs, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("user %q: want numeric uid:gid (runAsNonRoot needs numbers)", u)
	}
	if uid == 0 {
		return 0, 0, fmt.Errorf("user %q is root: every role runs as non-root", u)
	}
	return uid, gid, nil
}

// seccompProfile is the pod's seccomp profile for the plan's: ours,
// installed on the node under its hash (a Localhost profile), unless the
// pods are to use the runtime's default (Input.RuntimeDefaultSeccomp) or
// the plan names none.
func (in Input) seccompProfile(c plan.Container) *corev1.SeccompProfile {
	if c.Seccomp == "" || in.RuntimeDefaultSeccomp {
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}
	return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr(SeccompDir + "/" + SeccompFile(c.Seccomp))}
}

// securityContext is the container's: the restricted profile (non-root
// with the plan's uid and gid, read-only root, the plan's capabilities,
// no privilege escalation, the seccomp profile).
func (in Input) securityContext(c plan.Container, uid, gid int64) (*corev1.SecurityContext, error) {
	return &corev1.SecurityContext{
		RunAsNonRoot: ptr(true), RunAsUser: ptr(uid), RunAsGroup: ptr(gid),
		ReadOnlyRootFilesystem:   ptr(c.ReadOnlyRootfs),
		AllowPrivilegeEscalation: ptr(!c.NoNewPrivileges),
		Privileged:               ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: caps(c.CapDrop), Add: caps(c.CapAdd)},
		SeccompProfile:           in.seccompProfile(c),
	}, nil
}

func caps(in []string) []corev1.Capability {
	out := []corev1.Capability{}
	for _, c := range in {
		out = append(out, corev1.Capability(c))
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// podSecurityContext repeats the user and seccomp profile for the pod
// (fsGroup makes the emptyDir volumes the role's) and carries the plan's
// sysctls. A sysctl outside Kubernetes' safe set (net.ipv4.tcp_fastopen)
// must be allowed by the kubelet (allowedUnsafeSysctls), or the pod is
// refused: the run fails rather than losing the setting.
func (in Input) podSecurityContext(c plan.Container, uid, gid int64) *corev1.PodSecurityContext {
	psc := &corev1.PodSecurityContext{
		RunAsNonRoot: ptr(true), RunAsUser: ptr(uid), RunAsGroup: ptr(gid), FSGroup: ptr(gid),
		SeccompProfile: in.seccompProfile(c),
	}
	for _, k := range slices.Sorted(maps.Keys(c.Sysctls)) {
		psc.Sysctls = append(psc.Sysctls, corev1.Sysctl{Name: k, Value: c.Sysctls[k]})
	}
	return psc
}

// resources are the plan's memory and CPU limits.
func resources(c plan.Container) corev1.ResourceRequirements {
	mem := *resource.NewQuantity(c.MemoryBytes, resource.BinarySI)
	cpu := *resource.NewMilliQuantity(c.NanoCPUs/1_000_000, resource.DecimalSI)
	return corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceMemory: mem, corev1.ResourceCPU: cpu},
		Requests: corev1.ResourceList{corev1.ResourceMemory: mem, corev1.ResourceCPU: requestCPU},
	}
}

// rlimitsEnv hands the plan's ulimits to the role, which sets them on
// itself before it hardens (harden.EnvRlimits; our binary starts every
// role, a user's workload through the launcher): a pod takes no ulimits,
// and the runtime's defaults set no file size limit (probe T18). nproc is
// left out: RLIMIT_NPROC counts every process and thread of the real uid
// on the node, and ours, 65532, is distroless's "nonroot", which other
// pods share; set by a role it would bound nothing of the pod's own and
// could stop our roles starting threads because of unrelated pods. The
// per-pod bound is the kubelet's podPidsLimit. Any other ulimit the role
// cannot set is an error, never dropped.
func rlimitsEnv(c plan.Container) ([]corev1.EnvVar, error) {
	var ls []harden.Rlimit
	for _, u := range c.Ulimits {
		switch {
		case u.Name == "nproc":
			continue
		case u.Soft < 0 || u.Hard < 0:
			return nil, fmt.Errorf("ulimit %s=%d:%d: an unlimited (negative) value has no Kubernetes mapping", u.Name, u.Soft, u.Hard)
		}
		ls = append(ls, harden.Rlimit{Name: u.Name, Soft: uint64(u.Soft), Hard: uint64(u.Hard)})
	}
	if len(ls) == 0 {
		return nil, nil
	}
	v, err := harden.FormatRlimits(ls)
	if err != nil {
		return nil, fmt.Errorf("ulimit: %w; no Kubernetes mapping", err)
	}
	return []corev1.EnvVar{{Name: harden.EnvRlimits, Value: v}}, nil
}

func readiness(r *orchestrate.Readiness) *corev1.Probe {
	if r == nil {
		return nil
	}
	h := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: r.Path, Port: intstr.FromInt32(int32(r.Port))}}
	if r.TCP {
		h = corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(r.Port))}}
	}
	return &corev1.Probe{ProbeHandler: h, PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 3}
}

// dns mirrors the plan's resolver: a role the plan gives nameservers
// (0.0.0.0 for the internal-only roles: no resolver that answers) gets
// exactly those and no cluster DNS; a role with none (the gateway, which
// resolves public names itself) uses the cluster's.
func dns(ps *corev1.PodSpec, c plan.Container) {
	if len(c.DNS) == 0 {
		ps.DNSPolicy = corev1.DNSClusterFirst
		return
	}
	ps.DNSPolicy = corev1.DNSNone
	cfg := &corev1.PodDNSConfig{Nameservers: slices.Clone(c.DNS), Searches: []string{}}
	for _, o := range c.DNSOptions {
		name, val, ok := strings.Cut(o, ":")
		opt := corev1.PodDNSConfigOption{Name: name}
		if ok {
			opt.Value = ptr(val)
		}
		cfg.Options = append(cfg.Options, opt)
	}
	ps.DNSConfig = cfg
}

// hostAliases are the plan's black-holed names and, for each peer in
// Hosts, the ClusterIP of its Service.
func (in Input) hostAliases(st orchestrate.Step) ([]corev1.HostAlias, error) {
	byIP := map[string][]string{}
	var order []string
	add := func(ip, name string) {
		if _, ok := byIP[ip]; !ok {
			order = append(order, ip)
		}
		byIP[ip] = append(byIP[ip], name)
	}
	for _, h := range st.Spec.ExtraHosts {
		name, ip, ok := strings.Cut(h, ":")
		if !ok {
			return nil, fmt.Errorf("extra host %q: want name:address", h)
		}
		if ip == hostGateway {
			if in.HostGatewayIP == "" {
				return nil, fmt.Errorf("extra host %q: the spec reaches the Docker host (%s), which has no Kubernetes counterpart: name the address that stands for it (Input.HostGatewayIP)", h, name)
			}
			ip = in.HostGatewayIP
		}
		add(ip, name)
	}
	for _, h := range st.Hosts {
		ip, err := in.serviceIP(h.Name)
		if err != nil {
			return nil, err
		}
		add(ip.String(), h.Name)
	}
	if st.Role == orchestrate.RoleGateway {
		for _, h := range in.GatewayHosts {
			add(h.IP.String(), h.Name)
		}
	}
	var out []corev1.HostAlias
	for _, ip := range order {
		out = append(out, corev1.HostAlias{IP: ip, Hostnames: byIP[ip]})
	}
	return out, nil
}

func (in Input) serviceIP(name string) (netip.Addr, error) {
	s, ok := in.ServiceIPs[name]
	if !ok {
		return netip.Addr{}, fmt.Errorf("no ClusterIP for service %s (create the services first, then map the pods)", name)
	}
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.IsUnspecified() {
		return netip.Addr{}, fmt.Errorf("service %s: ClusterIP %q is not one address", name, s)
	}
	return ip, nil
}

// netguard is the agent pod's init container: our image, the netguard
// role, the addresses and ports of the agent's edges. It is the only
// container with NET_ADMIN, and it runs as root because a non-root
// process does not keep an added capability without file capabilities
// (our image has none); every other field is the agent's.
func (in Input) netguard(st orchestrate.Step, agent *corev1.SecurityContext) (corev1.Container, error) {
	var cfg netguard.Config
	for _, e := range in.edges() {
		if e.From != st.Role {
			continue
		}
		ip, err := in.serviceIP(e.Via)
		if err != nil {
			return corev1.Container{}, err
		}
		for _, p := range e.Ports {
			cfg.Allow = append(cfg.Allow, netip.AddrPortFrom(ip, uint16(p)))
		}
	}
	sc := agent.DeepCopy()
	sc.RunAsNonRoot, sc.RunAsUser, sc.RunAsGroup = ptr(false), ptr(int64(0)), ptr(int64(0))
	sc.ReadOnlyRootFilesystem, sc.AllowPrivilegeEscalation = ptr(true), ptr(false)
	sc.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_ADMIN"}}
	return corev1.Container{
		Name: NetguardContainer, Image: in.RuntimeImage, Args: netguard.Args(cfg),
		ImagePullPolicy: corev1.PullIfNotPresent, SecurityContext: sc,
		Resources:                corev1.ResourceRequirements{Limits: netguardLimit, Requests: netguardLimit},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}, nil
}
