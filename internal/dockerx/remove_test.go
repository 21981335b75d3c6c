package dockerx

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/moby/moby/client"
)

// TestRemoveContainerConcurrent: a container whose removal another caller
// started (the engine's 409 "already in progress") is waited for until it
// is gone; any other conflict is an error (found by the backend
// conformance suite: two gc's removed the same dead run's container).
func TestRemoveContainerConcurrent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		message string
		wantErr bool
	}{
		{"another removal", "removal of container abc is already in progress", false},
		{"other conflict", "You cannot remove a running container abc", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var inspects atomic.Int32
			api := fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				switch {
				case r.Method == http.MethodDelete:
					w.WriteHeader(http.StatusConflict)
					_ = json.NewEncoder(w).Encode(map[string]string{"message": tc.message})
				case strings.HasSuffix(r.URL.Path, "/json") && inspects.Add(1) < 3:
					_ = json.NewEncoder(w).Encode(map[string]any{"Id": "abc", "State": map[string]any{"Status": "removing"}})
				default:
					w.WriteHeader(http.StatusNotFound)
					_ = json.NewEncoder(w).Encode(map[string]string{"message": "No such container: abc"})
				}
			})
			err := (&Client{api: api}).RemoveContainer(context.Background(), "abc")
			if (err != nil) != tc.wantErr {
				t.Fatalf("RemoveContainer = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && inspects.Load() < 3 {
				t.Errorf("returned after %d inspections, before the container was gone", inspects.Load())
			}
		})
	}
}

// fakeAPI is a Docker API client talking to handler over a Unix socket.
func fakeAPI(t *testing.T, handler http.HandlerFunc) *client.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "api.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	api, err := client.New(client.WithHost("unix://"+sock), client.WithAPIVersion("1.41"))
	if err != nil {
		t.Fatal(err)
	}
	return api
}
