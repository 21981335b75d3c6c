package sandbox

import (
	"bytes"
	"net/url"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
)

// secretNameParts mark a host variable whose value is a secret by its
// name. A match errs towards secret: redacting a harmless value costs a
// less readable artifact, missing a key leaks it.
var secretNameParts = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE",
	"CREDENTIAL", "AUTH", "PRIVATE", "COOKIE", "SESSION", "SIGNATURE"}

// minSubstringRedact is the shortest value redacted wherever it occurs.
// A shorter one is redacted only as a whole token: replacing every "gpt"
// or "1" inside other words made artifacts unreadable, not safer.
const minSubstringRedact = 8

// secretEnvName reports whether the variable name looks like it holds a
// secret (OPENAI_API_KEY, GITHUB_TOKEN, DB_PASSWORD, ...).
func secretEnvName(name string) bool {
	up := strings.ToUpper(name)
	for _, p := range secretNameParts {
		if strings.Contains(up, p) {
			return true
		}
	}
	return false
}

// forwardEnv looks up the forwarded host variables. Values of secret-named
// variables are marked Secret (never printed in a plan) and returned for
// redaction from every artifact. Threat: a workload or a log line echoing
// the API key into an artifact someone shares. Other values (OPENAI_MODEL,
// OPENAI_BASE_URL) are kept readable, except a password inside a URL.
func forwardEnv(names []string, getenv func(string) string) (env []dockerx.EnvVar, secrets []string) {
	env = []dockerx.EnvVar{}
	for _, name := range names {
		v := getenv(name)
		if v == "" {
			continue
		}
		secret := secretEnvName(name)
		env = append(env, dockerx.EnvVar{Name: name, Value: v, Secret: secret})
		if secret {
			secrets = append(secrets, v)
		} else if pw := urlPassword(v); pw != "" {
			secrets = append(secrets, pw)
		}
	}
	return env, secrets
}

// urlPassword is the password of a URL with credentials in it
// (https://user:pw@host), or "".
func urlPassword(v string) string {
	u, err := url.Parse(v)
	if err != nil || u.User == nil {
		return ""
	}
	pw, _ := u.User.Password()
	return pw
}

// redact removes every secret value from data: a long one wherever it
// occurs, a short one only where it stands alone as a token.
func (j *job) redact(data []byte) []byte {
	for _, s := range j.secrets {
		switch {
		case len(s) >= minSubstringRedact:
			data = bytes.ReplaceAll(data, []byte(s), []byte(dockerx.Redacted))
		case s != "":
			data = redactToken(data, []byte(s))
		}
	}
	return data
}

// redactToken replaces s where neither neighbour is a letter or a digit.
func redactToken(data, s []byte) []byte {
	var out []byte
	rest := data
	for {
		i := bytes.Index(rest, s)
		if i < 0 {
			break
		}
		end := i + len(s)
		if (i > 0 && isAlnum(rest[i-1])) || (end < len(rest) && isAlnum(rest[end])) {
			out = append(out, rest[:i+1]...)
			rest = rest[i+1:]
			continue
		}
		out = append(append(out, rest[:i]...), dockerx.Redacted...)
		rest = rest[end:]
	}
	if out == nil {
		return data
	}
	return append(out, rest...)
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
