package dockerx

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"
)

// Pusher is what the Kubernetes backend needs of an engine to put our
// image in a registry the user names. It is not part of [Engine]: only
// that backend pushes, and only with --kube-image-registry.
type Pusher interface {
	// TagImage names the image source also as target (REPO:TAG).
	TagImage(ctx context.Context, source, target string) error
	// PushImage pushes ref (REPO:TAG) and returns the digest of the
	// manifest the registry stored ("sha256:…"). auth is the
	// X-Registry-Auth value ([RegistryAuth]); "" sends none.
	PushImage(ctx context.Context, ref, auth string) (string, error)
}

// ParseRepository checks that s names a repository (a Docker reference
// without tag or digest, e.g. registry.example.com/team/mcpsidecar) and
// returns it fully qualified (docker.io/library/x for a bare x), the form
// a cluster's runtime resolves the same way on every node.
func ParseRepository(s string) (string, error) {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return "", fmt.Errorf("%q is not an image repository: %w", s, err)
	}
	if _, ok := named.(reference.Tagged); ok {
		return "", fmt.Errorf("%q has a tag: want a repository only (the tag is our image's content hash)", s)
	}
	if _, ok := named.(reference.Digested); ok {
		return "", fmt.Errorf("%q has a digest: want a repository only (the digest is the push's)", s)
	}
	return named.Name(), nil
}

// TagImage names source also as target.
func (c *Client) TagImage(ctx context.Context, source, target string) error {
	if _, err := c.api.ImageTag(ctx, client.ImageTagOptions{Source: source, Target: target}); err != nil {
		return fmt.Errorf("tagging image %s as %s: %w", source, target, err)
	}
	return nil
}

// PushImage pushes ref to its registry and returns the pushed manifest's
// digest, read from the engine's progress stream ([PushDigest]).
func (c *Client) PushImage(ctx context.Context, ref, auth string) (string, error) {
	if auth == "" {
		// An empty credential, as the docker CLI sends: Docker 20.10
		// refuses a push without the header ("Bad parameters and
		// missing X-Registry-Auth: EOF").
		auth = base64.URLEncoding.EncodeToString([]byte("{}"))
	}
	resp, err := c.api.ImagePush(ctx, ref, client.ImagePushOptions{RegistryAuth: auth})
	if err != nil {
		return "", fmt.Errorf("pushing image %s: %w", ref, err)
	}
	defer resp.Close()
	d, err := PushDigest(resp)
	if err != nil {
		return "", fmt.Errorf("pushing image %s: %w", ref, err)
	}
	return d, nil
}

// PushDigest reads a push's progress stream to its end: an error the
// engine reports in it (a registry that refused, a failed upload) is
// returned, else the digest of the aux message the engine sends once the
// manifest is stored ({"aux":{"Tag":…,"Digest":"sha256:…","Size":…}}). A
// stream that ends without one is an error: the caller must not guess
// which bytes the registry holds.
func PushDigest(r io.Reader) (string, error) {
	dec := json.NewDecoder(r)
	var digest string
	for {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
			Aux *struct {
				Digest string `json:"Digest"`
			} `json:"aux"`
		}
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("reading engine progress: %w", err)
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return "", errors.New(strings.TrimSpace(m.ErrorDetail.Message))
		}
		if m.Error != "" {
			return "", errors.New(strings.TrimSpace(m.Error))
		}
		if m.Aux != nil && m.Aux.Digest != "" {
			digest = m.Aux.Digest
		}
	}
	if digest == "" {
		return "", errors.New("the engine reported no digest for the pushed manifest")
	}
	if _, err := reference.Parse("x@" + digest); err != nil {
		return "", fmt.Errorf("the engine reported digest %q: %w", digest, err)
	}
	return digest, nil
}

// ConfigFile is the Docker client's config file, where `docker login`
// stores credentials: $DOCKER_CONFIG/config.json, else
// ~/.docker/config.json (the directory contexts are read from, too).
func ConfigFile(getenv func(string) string) string {
	return filepath.Join(dockerConfigDir(getenv), "config.json")
}

// RegistryAuth is the X-Registry-Auth value for repo's registry, from the
// auths section of the Docker client's config file (its "auth" field,
// base64 "user:password", as `docker login` stores it); "" when the file
// or the registry's entry is missing. Credential helpers and credsStore
// are not asked. The value goes to the engine only: no caller may log or
// record it.
func RegistryAuth(configFile, repo string) (string, error) {
	named, err := reference.ParseNormalizedNamed(repo)
	if err != nil {
		return "", fmt.Errorf("%q is not an image repository: %w", repo, err)
	}
	data, err := os.ReadFile(configFile)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading registry credentials: %w", err)
	}
	var cfg struct {
		Auths map[string]struct {
			Auth string `json:"auth"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return "", fmt.Errorf("reading registry credentials from %s: %w", configFile, err)
	}
	host := reference.Domain(named)
	for _, key := range slices.Sorted(maps.Keys(cfg.Auths)) { // one answer when two keys name the host
		if e := cfg.Auths[key]; e.Auth != "" && authKeyMatches(key, host) {
			return encodeAuth(key, e.Auth)
		}
	}
	return "", nil
}

// authKeyMatches says whether an auths key ("host", "https://host/v1/")
// is the registry host; Docker Hub's key is its index's address.
func authKeyMatches(key, host string) bool {
	k := key
	if i := strings.Index(k, "://"); i >= 0 {
		k = k[i+3:]
	}
	k, _, _ = strings.Cut(k, "/")
	if host == "docker.io" {
		return k == "index.docker.io" || k == "docker.io" || k == "registry-1.docker.io"
	}
	return k == host
}

// encodeAuth turns a stored "auth" into the header's form: base64url
// JSON of the user, password and server address (the key, as the Docker
// client sends it).
func encodeAuth(key, auth string) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(auth)
	if err != nil {
		return "", fmt.Errorf("reading registry credentials for %s: the auth field is not base64", key)
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", fmt.Errorf("reading registry credentials for %s: the auth field is not user:password", key)
	}
	b, err := json.Marshal(registry.AuthConfig{Username: user, Password: pass, ServerAddress: key})
	if err != nil {
		return "", fmt.Errorf("encoding registry credentials for %s: %w", key, err)
	}
	return base64.URLEncoding.EncodeToString(b), nil
}
