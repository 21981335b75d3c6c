package cli

import (
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerbackend"
	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/kube"
	kubebackend "github.com/mcpsidecar/mcpsidecar/internal/kube/backend"
	"github.com/mcpsidecar/mcpsidecar/internal/sandbox"
)

// Backends (--backend, MCPSIDECAR_BACKEND).
const (
	backendDocker     = "docker"
	backendKubernetes = "kubernetes"
	envBackend        = "MCPSIDECAR_BACKEND"
)

// backendFlags choose where the roles run (issue 20): run, doctor and
// test-sandbox take them.
type backendFlags struct {
	backend, kubeconfig, context, prefix string
	imageImport, imageRegistry, nodeRoot string
	podAddresses                         bool
	gatewayHosts                         []string
}

func (b *backendFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&b.backend, "backend", orDefault(os.Getenv(envBackend), backendDocker),
		"where the roles run: docker, or kubernetes (pods in a namespace of their own; docs/kubernetes.md) ("+envBackend+")")
	f.StringVar(&b.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, then ~/.kube/config, then the in-cluster account)")
	f.StringVar(&b.context, "context", "", "kubeconfig context (default its current one)")
	f.StringVar(&b.prefix, "namespace-prefix", kube.DefaultNamespacePrefix, "start of each run namespace's name")
	f.StringVar(&b.imageImport, "kube-image-import", "",
		"bring our image to a node on this machine: "+kube.ImageImport+"SOCKET imports it into that containerd (the engine's image export, ctr import); unset, the cluster must hold it")
	f.StringVar(&b.imageRegistry, "kube-image-registry", "",
		"REPO (e.g. registry.example.com/team/mcpsidecar): push our image there as REPO:<its content hash> through the engine and run the pods from REPO@<the pushed digest>; credentials from the Docker config's auths (~/.docker/config.json, or $DOCKER_CONFIG)")
	f.StringVar(&b.nodeRoot, "kube-node-root", "",
		"the kubelet root directory of the cluster's one node, when that node is this machine: our seccomp profile is installed there (a Localhost profile); unset, the pods use the runtime's default seccomp profile")
	f.String("kube-holder-image", "", "")
	_ = f.MarkDeprecated("kube-holder-image", "it is ignored: every pod's holder runs our own image")
	f.BoolVar(&b.podAddresses, "kube-pod-addresses", false, "address the roles by their pods' addresses, not their Services' (clusters without kube-proxy)")
	f.StringArrayVar(&b.gatewayHosts, "kube-gateway-host", nil,
		"NAME=ADDRESS: the gateway pod resolves NAME to ADDRESS from its /etc/hosts instead of asking the cluster's DNS (repeatable; for a cluster without DNS, or a name only your resolver knows); the spec's rules still apply to both")
}

// kube checks the flags and, for the Kubernetes backend, connects.
func (b backendFlags) kube(o sandboxOptions) (*kubebackend.Config, error) {
	switch b.backend {
	case backendDocker:
		return nil, nil
	case backendKubernetes:
	default:
		return nil, usageErrorf("--backend %q: want %s or %s", b.backend, backendDocker, backendKubernetes)
	}
	if o.keep {
		return nil, usageErrorf("--keep is not supported with --backend %s yet", backendKubernetes)
	}
	if o.squid() {
		return nil, usageErrorf("--gateway-engine squid is not supported with --backend %s: the Squid image is not brought to the cluster; use the default gateway", backendKubernetes)
	}
	k := &kubebackend.Config{NamespacePrefix: b.prefix, NodeRoot: b.nodeRoot, PodAddresses: b.podAddresses}
	if b.imageImport != "" {
		sock, err := kube.ParseImageImport(b.imageImport)
		if err != nil {
			return nil, usageErrorf("--kube-image-import: %v", err)
		}
		k.ImportSocket = sock
	}
	if b.imageRegistry != "" {
		if b.imageImport != "" {
			return nil, usageErrorf("--kube-image-registry and --kube-image-import both bring the image to the cluster: give one")
		}
		repo, err := dockerx.ParseRepository(b.imageRegistry)
		if err != nil {
			return nil, usageErrorf("--kube-image-registry: %v", err)
		}
		k.Registry, k.DockerConfig = repo, dockerx.ConfigFile(os.Getenv)
	}
	for _, h := range b.gatewayHosts {
		e, err := kube.ParseHostEntry(h)
		if err != nil {
			return nil, usageErrorf("--kube-gateway-host %v", err)
		}
		k.GatewayHosts = append(k.GatewayHosts, e)
	}
	if b.nodeRoot != "" && !filepath.IsAbs(b.nodeRoot) {
		return nil, usageErrorf("--kube-node-root %q: want an absolute path", b.nodeRoot)
	}
	cfg, err := kube.Config(b.kubeconfigPath(), b.context)
	if err != nil {
		return nil, err
	}
	if k.Client, err = kube.NewClient(cfg); err != nil {
		return nil, err
	}
	return k, nil
}

// kubeReadyTimeout is --ready-timeout's default on the Kubernetes
// backend: a pod is scheduled, its volumes set up and its containers
// created (an init container first, for the agent) before it is ready,
// and ten runs starting at once on a two-core node took more than
// Docker's 30 s.
const kubeReadyTimeout = 2 * time.Minute

// backendDefaults changes the defaults that differ on the Kubernetes
// backend, for the flags the user did not set.
func (o *sandboxOptions) backendDefaults(cmd *cobra.Command) {
	if o.kube != nil && !cmd.Flags().Changed("ready-timeout") {
		o.readyTimeout = kubeReadyTimeout
	}
}

// kubeconfigPath is --kubeconfig, $KUBECONFIG, ~/.kube/config if it
// exists, or "" (the in-cluster account).
func (b backendFlags) kubeconfigPath() string {
	if b.kubeconfig != "" {
		return b.kubeconfig
	}
	if v := os.Getenv("KUBECONFIG"); v != "" {
		return v
	}
	if home, err := os.UserHomeDir(); err == nil {
		if p := filepath.Join(home, ".kube", "config"); fileExists(p) {
			return p
		}
	}
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// backend is where the run's containers go: the cluster --backend
// kubernetes named, or Docker.
func (o sandboxOptions) backend() sandbox.Backend {
	if o.kube != nil {
		return kubebackend.New(o.kube)
	}
	return dockerbackend.New()
}
