package dockerx

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/moby/moby/client"
)

// TestVersionPodman: the /version answer of Podman's Docker-compatible
// API (its shape as Podman 5 serves it) is recognised; Docker's is not
// taken for it.
func TestVersionPodman(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   map[string]any
		podman bool
	}{
		{"podman", map[string]any{"Version": "5.4.2", "ApiVersion": "1.41", "MinAPIVersion": "1.24",
			"Components": []map[string]any{{"Name": "Podman Engine", "Version": "5.4.2"}}}, true},
		{"docker", map[string]any{"Version": "26.1.5", "ApiVersion": "1.45", "MinAPIVersion": "1.24",
			"Components": []map[string]any{{"Name": "Engine", "Version": "26.1.5"}, {"Name": "containerd", "Version": "1.7"}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "api.sock")
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Api-Version", "1.41")
				_ = json.NewEncoder(w).Encode(tc.body)
			})}
			go srv.Serve(l)
			defer srv.Close()
			api, err := client.New(client.WithHost("unix://"+sock), client.WithAPIVersion("1.41"))
			if err != nil {
				t.Fatal(err)
			}
			v, err := (&Client{api: api}).Version(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if v.Podman != tc.podman || v.Version != tc.body["Version"] {
				t.Errorf("Version = %+v, want podman %v", v, tc.podman)
			}
		})
	}
}
