//go:build linux

package roles

import (
	"bytes"
	"encoding/json"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// loadInjection reads the credentials the gateway holds: the routes from
// $MCPSIDECAR_GATEWAY_CREDENTIALS, the run's placeholder, and each value
// from the variable its route names. Every value is then removed from the
// process environment, so nothing the gateway later runs or reports can
// read it back. A credential whose variable is empty is kept: the
// listener refuses its requests with a reason that says so.
func loadInjection(getenv func(string) string, unsetenv func(string) error) (*egress.Injection, error) {
	raw := getenv(spec.EnvGatewayCredentials)
	if raw == "" {
		return nil, usageErrorf("--credential-listen: no credentials in $%s", spec.EnvGatewayCredentials)
	}
	var routes []spec.GatewayCredential
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&routes); err != nil {
		return nil, usageErrorf("$%s: %v", spec.EnvGatewayCredentials, err)
	}
	in := &egress.Injection{Placeholder: getenv(spec.EnvCredentialPlaceholder)}
	for _, r := range routes {
		in.Credentials = append(in.Credentials, egress.Credential{
			Host: r.Host, Port: r.Port, Scheme: r.Scheme, Header: r.Header, Format: r.Format,
			Value: getenv(r.FromEnv), Source: r.FromEnv,
		})
	}
	// Unset only once every route has read its value: two credentials
	// may name the same variable (red team, issue 26).
	for _, r := range routes {
		unsetenv(r.FromEnv)
	}
	unsetenv(spec.EnvCredentialPlaceholder)
	return in, nil
}
