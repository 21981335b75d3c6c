package redact

import (
	"bytes"
	"net/url"
	"strings"
)

// secretNameParts mark a host variable whose value is a secret by its
// name. A match errs towards secret: redacting a harmless value costs a
// less readable artifact, missing a key leaks it.
var secretNameParts = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE",
	"CREDENTIAL", "AUTH", "PRIVATE", "COOKIE", "SESSION", "SIGNATURE"}

// SecretName reports whether a variable's name says it holds a secret
// (OPENAI_API_KEY, GITHUB_TOKEN, DB_PASSWORD, ...).
func SecretName(name string) bool {
	up := strings.ToUpper(name)
	for _, p := range secretNameParts {
		if strings.Contains(up, p) {
			return true
		}
	}
	return false
}

// URLPassword is the password of a URL with credentials in it
// (https://user:pw@host), or "".
func URLPassword(v string) string {
	u, err := url.Parse(v)
	if err != nil || u.User == nil {
		return ""
	}
	pw, _ := u.User.Password()
	return pw
}

// minSubstring is the shortest value removed wherever it occurs. A
// shorter one is removed only as a whole token: replacing every "gpt" or
// "1" inside other words made artifacts unreadable, not safer.
const minSubstring = 8

// Values removes every secret value from data and writes marker in its
// place: a long one wherever it occurs, a short one only where it stands
// alone as a token (neither neighbour a letter or a digit).
func Values(data []byte, secrets []string, marker string) []byte {
	for _, s := range secrets {
		switch {
		case len(s) >= minSubstring:
			data = bytes.ReplaceAll(data, []byte(s), []byte(marker))
		case s != "":
			data = replaceToken(data, []byte(s), marker)
		}
	}
	return data
}

// replaceToken replaces s where neither neighbour is a letter or a digit.
func replaceToken(data, s []byte, marker string) []byte {
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
		out = append(append(out, rest[:i]...), marker...)
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
