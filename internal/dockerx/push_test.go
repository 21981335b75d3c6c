package dockerx

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/registry"
)

const testDigest = "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"

// TestPushDigest: the digest is the aux message's; an error in the stream
// (after progress, even after an aux) is returned as the engine wrote it;
// a stream without a digest, or with a malformed one, is an error.
func TestPushDigest(t *testing.T) {
	progress := `{"status":"The push refers to repository [127.0.0.1:5000/m]"}` + "\n" +
		`{"status":"Pushing","progressDetail":{"current":512,"total":1024},"id":"a1b2"}` + "\n"
	aux := `{"status":"abc: digest: ` + testDigest + ` size: 528"}` + "\n" +
		`{"progressDetail":{},"aux":{"Tag":"abc","Digest":"` + testDigest + `","Size":528}}` + "\n"
	for _, tt := range []struct {
		name, stream, want, wantErr string
	}{
		{"ok", progress + aux, testDigest, ""},
		{"error", progress + `{"errorDetail":{"message":"denied: requested access to the resource is denied"},"error":"denied: requested access to the resource is denied"}` + "\n",
			"", "denied: requested access to the resource is denied"},
		{"error-only-field", progress + `{"error":"unauthorized: authentication required"}`, "", "unauthorized: authentication required"},
		{"error-after-aux", progress + aux + `{"errorDetail":{"message":"signing failed"}}`, "", "signing failed"},
		{"no-digest", progress, "", "no digest"},
		{"bad-digest", `{"aux":{"Digest":"sha256:xyz"}}`, "", `digest "sha256:xyz"`},
		{"truncated", progress + `{"status":`, "", "reading engine progress"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PushDigest(strings.NewReader(tt.stream))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("PushDigest() = %q, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("PushDigest() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestParseRepository(t *testing.T) {
	for _, tt := range []struct{ in, want, wantErr string }{
		{"registry.example.com/team/mcpsidecar", "registry.example.com/team/mcpsidecar", ""},
		{"127.0.0.1:5000/m", "127.0.0.1:5000/m", ""},
		{"mcpsidecar", "docker.io/library/mcpsidecar", ""},
		{"registry.example.com/m:latest", "", "has a tag"},
		{"registry.example.com/m@" + testDigest, "", "has a digest"},
		{"registry.example.com/M", "", "not an image repository"},
		{"", "", "not an image repository"},
	} {
		got, err := ParseRepository(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseRepository(%q) = %q, %v; want an error with %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRepository(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestRegistryAuth: the registry host's entry of auths becomes the
// header's base64url JSON; another host's, a missing file, or an entry
// without auth gives none; a malformed entry is an error that does not
// quote it.
func TestRegistryAuth(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	if err := os.WriteFile(cfg, []byte(`{"auths":{
		"registry.example.com": {"auth": "`+b64("alice:s3cret:x")+`"},
		"https://index.docker.io/v1/": {"auth": "`+b64("bob:hub")+`"},
		"other.example.com": {"auth": "`+b64("carol:no")+`"},
		"bad.example.com": {"auth": "not base64!"},
		"token.example.com": {"identitytoken": "t"}
	}, "credsStore": "desktop"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		repo, user, pass, server, wantErr string
	}{
		{repo: "registry.example.com/team/m", user: "alice", pass: "s3cret:x", server: "registry.example.com"},
		{repo: "library/m", user: "bob", pass: "hub", server: "https://index.docker.io/v1/"},
		{repo: "127.0.0.1:5000/m"},
		{repo: "token.example.com/m"},
		{repo: "bad.example.com/m", wantErr: "not base64"},
	} {
		got, err := RegistryAuth(cfg, tt.repo)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "not base64!") {
				t.Errorf("%s: RegistryAuth() error %v, want one with %q that does not quote the entry", tt.repo, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.repo, err)
		}
		if tt.user == "" {
			if got != "" {
				t.Errorf("%s: RegistryAuth() = %q, want none", tt.repo, got)
			}
			continue
		}
		raw, err := base64.URLEncoding.DecodeString(got)
		if err != nil {
			t.Fatalf("%s: header %q is not base64url: %v", tt.repo, got, err)
		}
		var a registry.AuthConfig
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatal(err)
		}
		if a.Username != tt.user || a.Password != tt.pass || a.ServerAddress != tt.server {
			t.Errorf("%s: auth %+v, want user %s password %s server %s", tt.repo, a, tt.user, tt.pass, tt.server)
		}
	}
	if got, err := RegistryAuth(filepath.Join(dir, "missing.json"), "registry.example.com/m"); got != "" || err != nil {
		t.Errorf("missing file: %q, %v; want none", got, err)
	}
}
