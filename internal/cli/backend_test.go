package cli

import (
	"strings"
	"testing"
)

// TestBackendFlags: the Docker backend needs nothing; a bad choice of
// backend, --keep, a malformed import or a node root without its holder
// is a usage error naming the flag, before any cluster is contacted.
func TestBackendFlags(t *testing.T) {
	for _, tt := range []struct {
		name    string
		b       backendFlags
		keep    bool
		wantErr string
	}{
		{"docker", backendFlags{backend: "docker"}, true, ""},
		{"unknown", backendFlags{backend: "nomad"}, false, `--backend "nomad"`},
		{"keep", backendFlags{backend: "kubernetes"}, true, "--keep is not supported"},
		{"import", backendFlags{backend: "kubernetes", imageImport: "registry:x"}, false, "--kube-image-import"},
		{"import-relative", backendFlags{backend: "kubernetes", imageImport: "containerd:run/c.sock"}, false, "--kube-image-import"},
		{"node-root-relative", backendFlags{backend: "kubernetes", nodeRoot: "kubelet", holderImage: "p"}, false, "--kube-node-root"},
		{"node-root-alone", backendFlags{backend: "kubernetes", nodeRoot: "/var/lib/kubelet"}, false, "go together"},
		{"holder-alone", backendFlags{backend: "kubernetes", holderImage: "pause"}, false, "go together"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, err := tt.b.kube(tt.keep)
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
