package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	kubebackend "github.com/mcpsidecar/mcpsidecar/internal/kube/backend"
)

// TestBackendFlags: the Docker backend needs nothing; a bad choice of
// backend, --keep, a malformed import or a node root without its holder
// is a usage error naming the flag, before any cluster is contacted.
func TestBackendFlags(t *testing.T) {
	for _, tt := range []struct {
		name    string
		b       backendFlags
		o       sandboxOptions
		wantErr string
	}{
		{"docker", backendFlags{backend: "docker"}, sandboxOptions{keep: true, gatewayEngine: "squid"}, ""},
		{"unknown", backendFlags{backend: "nomad"}, sandboxOptions{}, `--backend "nomad"`},
		{"keep", backendFlags{backend: "kubernetes"}, sandboxOptions{keep: true}, "--keep is not supported"},
		{"squid", backendFlags{backend: "kubernetes"}, sandboxOptions{gatewayEngine: "squid"}, "--gateway-engine squid is not supported"},
		{"import", backendFlags{backend: "kubernetes", imageImport: "registry:x"}, sandboxOptions{}, "--kube-image-import"},
		{"import-relative", backendFlags{backend: "kubernetes", imageImport: "containerd:run/c.sock"}, sandboxOptions{}, "--kube-image-import"},
		{"registry-and-import", backendFlags{backend: "kubernetes", imageImport: "containerd:/run/c.sock", imageRegistry: "registry.example.com/team/mcpsidecar"}, sandboxOptions{}, "--kube-image-registry and --kube-image-import"},
		{"registry-tag", backendFlags{backend: "kubernetes", imageRegistry: "registry.example.com/team/mcpsidecar:v1"}, sandboxOptions{}, `--kube-image-registry: "registry.example.com/team/mcpsidecar:v1" has a tag`},
		{"registry-digest", backendFlags{backend: "kubernetes", imageRegistry: "registry.example.com/m@sha256:" + strings.Repeat("ab", 32)}, sandboxOptions{}, "has a digest"},
		{"registry-upper", backendFlags{backend: "kubernetes", imageRegistry: "registry.example.com/Team/m"}, sandboxOptions{}, "--kube-image-registry: \"registry.example.com/Team/m\" is not an image repository"},
		{"registry-scheme", backendFlags{backend: "kubernetes", imageRegistry: "https://registry.example.com/m"}, sandboxOptions{}, "is not an image repository"},
		{"registry-ok", backendFlags{backend: "kubernetes", imageRegistry: "127.0.0.1:5000/team/m", kubeconfig: "/nonexistent/kubeconfig"}, sandboxOptions{}, "/nonexistent/kubeconfig"},
		{"node-root-relative", backendFlags{backend: "kubernetes", nodeRoot: "kubelet"}, sandboxOptions{}, "--kube-node-root"},
		{"gateway-host", backendFlags{backend: "kubernetes", gatewayHosts: []string{"model.test=10.237.0.9", "model.test"}}, sandboxOptions{}, `--kube-gateway-host "model.test": want NAME=ADDRESS`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, err := tt.b.kube(tt.o)
			if tt.wantErr == "" {
				if err != nil || k != nil {
					t.Fatalf("kube() = %v, %v; want nil, nil", k, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("kube() error %v, want one with %q", err, tt.wantErr)
			}
		})
	}
}

// TestBackendDefaults: the Kubernetes backend waits longer for readiness
// unless --ready-timeout was given; Docker keeps its default.
func TestBackendDefaults(t *testing.T) {
	for _, tt := range []struct {
		kube bool
		args []string
		want time.Duration
	}{
		{false, nil, 30 * time.Second},
		{true, nil, kubeReadyTimeout},
		{true, []string{"--ready-timeout", "45s"}, 45 * time.Second},
	} {
		o := sandboxOptions{command: "run"}
		cmd := &cobra.Command{Use: "run", RunE: func(*cobra.Command, []string) error { return nil }}
		o.addFlags(cmd, time.Minute)
		if err := cmd.ParseFlags(tt.args); err != nil {
			t.Fatal(err)
		}
		if tt.kube {
			o.kube = &kubebackend.Config{}
		}
		o.backendDefaults(cmd)
		if o.readyTimeout != tt.want {
			t.Errorf("kube %v args %v: ready timeout %s, want %s", tt.kube, tt.args, o.readyTimeout, tt.want)
		}
	}
}
