package dockerx

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestContextHost(t *testing.T) {
	cfg := t.TempDir()
	writeContext := func(name, host string) {
		sum := sha256.Sum256([]byte(name))
		dir := filepath.Join(cfg, "contexts", "meta", hex.EncodeToString(sum[:]))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		meta := `{"Name":"` + name + `","Endpoints":{"docker":{"Host":"` + host + `","SkipTLSVerify":false}}}`
		if err := os.WriteFile(filepath.Join(dir, "meta.json"), []byte(meta), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeContext("remote", "unix:///run/other.sock")
	writeContext("current", "unix:///run/current.sock")
	if err := os.WriteFile(filepath.Join(cfg, "config.json"), []byte(`{"currentContext":"current"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		env     map[string]string
		dir     string
		want    string
		wantErr string
	}{
		{"DOCKER_HOST wins", map[string]string{"DOCKER_HOST": "unix:///x.sock", "DOCKER_CONTEXT": "remote"}, cfg, "", ""},
		{"DOCKER_CONTEXT", map[string]string{"DOCKER_CONTEXT": "remote"}, cfg, "unix:///run/other.sock", ""},
		{"current context", nil, cfg, "unix:///run/current.sock", ""},
		{"default context", map[string]string{"DOCKER_CONTEXT": "default"}, cfg, "", ""},
		{"no config", nil, t.TempDir(), "", ""},
		{"unknown context", map[string]string{"DOCKER_CONTEXT": "nope"}, cfg, "", `docker context "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := contextHost(func(k string) string { return tt.env[k] }, tt.dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
