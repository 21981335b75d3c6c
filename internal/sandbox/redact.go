package sandbox

import (
	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/redact"
)

// forwardEnv looks up the forwarded host variables. Values of secret-named
// variables ([redact.SecretName]) are marked Secret (never printed in a
// plan) and returned for redaction from every artifact. Threat: a workload
// or a log line echoing the API key into an artifact someone shares. Other
// values (OPENAI_MODEL, OPENAI_BASE_URL) are kept readable, except a
// password inside a URL.
func forwardEnv(names []string, getenv func(string) string) (env []dockerx.EnvVar, secrets []string) {
	env = []dockerx.EnvVar{}
	for _, name := range names {
		v := getenv(name)
		if v == "" {
			continue
		}
		secret := redact.SecretName(name)
		env = append(env, dockerx.EnvVar{Name: name, Value: v, Secret: secret})
		if secret {
			secrets = append(secrets, v)
		} else if pw := redact.URLPassword(v); pw != "" {
			secrets = append(secrets, pw)
		}
	}
	return env, secrets
}

// Redactor removes the run's secret values from data (Options.Watch).
type Redactor func(data []byte) []byte

// redact removes every secret value from data ([redact.Values]), marked
// as in a printed plan ([dockerx.Redacted]). The host knows the exact
// values it passed in; the shape layer ([redact.String]) runs where text
// first reaches a log, in the sidecar's audit and the probe's results.
func (j *job) redact(data []byte) []byte {
	return redact.Values(data, j.secrets, dockerx.Redacted)
}
