//go:build !windows

package hostca

import "runtime"

// System reads this host's CA bundle file ([DefaultPath]).
func System() (Bundle, error) { return readFile(DefaultPath()) }

// DefaultPath is where this host keeps its CA bundle: Debian's
// ca-certificates file, or macOS's /etc/ssl/cert.pem.
func DefaultPath() string {
	if runtime.GOOS == "darwin" {
		return "/etc/ssl/cert.pem"
	}
	return "/etc/ssl/certs/ca-certificates.crt"
}

// Hint says how to get a bundle when [System] fails.
const Hint = "install ca-certificates, or point MCPSIDECAR_CA_BUNDLE at a PEM bundle"
