package sandbox

import (
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/probe"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/verdict"
)

// credentials is where each credential of the run lives and the values
// the gateway holds. orchestrate.Credentials decides both from the profile,
// the engine and the host's variables alone, so asking it again here gives
// what planInput gave the containers.
func (j *job) credentials() (places []runs.Credential, held []verdict.HeldValue) {
	if j.profile == nil {
		return nil, nil
	}
	ce, err := orchestrate.Credentials(j.profile, j.o.GatewayEngine, j.getenv, "")
	if err != nil {
		return nil, nil // planInput failed the run with this error
	}
	for _, w := range ce.Where {
		places = append(places, runs.Credential{Variable: w.Variable, Host: w.Host, Lives: w.Lives})
	}
	for _, e := range ce.Gateway {
		if e.Secret && e.Name != spec.EnvCredentialPlaceholder && e.Value != "" {
			held = append(held, verdict.HeldValue{Variable: e.Name, Value: e.Value})
		}
	}
	return places, held
}

// probeCredentials is the probe context's view: names and places only.
func probeCredentials(places []runs.Credential) []probe.CredentialPlace {
	var out []probe.CredentialPlace
	for _, p := range places {
		out = append(out, probe.CredentialPlace{Variable: p.Variable, Host: p.Host, Lives: p.Lives})
	}
	return out
}
