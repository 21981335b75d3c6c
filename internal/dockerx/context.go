package dockerx

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// contextHost returns the daemon address of the Docker CLI context in
// use, as the docker command would pick it: none when DOCKER_HOST is set
// (the client reads it itself), else DOCKER_CONTEXT, else the config's
// currentContext; "" for the default context. configDir is
// $DOCKER_CONFIG or ~/.docker.
func contextHost(getenv func(string) string, configDir string) (string, error) {
	if getenv("DOCKER_HOST") != "" {
		return "", nil
	}
	name := getenv("DOCKER_CONTEXT")
	if name == "" {
		var cfg struct {
			CurrentContext string `json:"currentContext"`
		}
		b, err := os.ReadFile(filepath.Join(configDir, "config.json"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("reading the Docker CLI config: %w", err)
		}
		if err == nil && json.Unmarshal(b, &cfg) != nil {
			return "", fmt.Errorf("reading the Docker CLI config %s: not JSON", filepath.Join(configDir, "config.json"))
		}
		name = cfg.CurrentContext
	}
	if name == "" || name == "default" {
		return "", nil
	}
	sum := sha256.Sum256([]byte(name))
	path := filepath.Join(configDir, "contexts", "meta", hex.EncodeToString(sum[:]), "meta.json")
	var meta struct {
		Endpoints struct {
			Docker struct {
				Host string `json:"Host"`
			} `json:"docker"`
		} `json:"Endpoints"`
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("docker context %q does not exist (see: docker context ls)", name)
	}
	if err != nil {
		return "", fmt.Errorf("reading docker context %q: %w", name, err)
	}
	if err := json.Unmarshal(b, &meta); err != nil || meta.Endpoints.Docker.Host == "" {
		return "", fmt.Errorf("docker context %q: %s names no docker endpoint", name, path)
	}
	return meta.Endpoints.Docker.Host, nil
}

// dockerConfigDir is $DOCKER_CONFIG, else ~/.docker.
func dockerConfigDir(getenv func(string) string) string {
	if d := getenv("DOCKER_CONFIG"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".docker")
}
