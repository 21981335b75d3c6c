package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Normalize returns the spec's normalised JSON and its hash, byte for byte
// as the seed computed them (Python json.dumps with sort_keys, compact
// separators and ensure_ascii), so a seed spec keeps its identity:
// environment variables sorted by name, every other list in spec order.
func Normalize(s *Spec) (js string, hash string, err error) {
	vars := make([]map[string]any, 0, len(s.Env))
	for _, v := range sortedEnv(s.Env) {
		if v.FromHost {
			vars = append(vars, map[string]any{"name": v.Name, "from_host": true})
		} else {
			vars = append(vars, map[string]any{"name": v.Name, "value": v.Value})
		}
	}
	doc := map[string]any{
		"schema_version":        s.SchemaVersion,
		"capabilities":          s.Capabilities,
		"allowed_domains":       s.AllowedDomains,
		"allowed_ip_addresses":  s.AllowedIPs,
		"environment_variables": vars,
	}
	// Keys the seed never had are added only when used, so that a seed
	// spec keeps its hash.
	if len(s.Credentials) > 0 {
		creds := make([]map[string]any, 0, len(s.Credentials))
		for _, c := range s.Credentials {
			creds = append(creds, map[string]any{"host": c.Host, "header": c.Header, "format": c.Format, "from_host": c.FromHost})
		}
		doc["credentials"] = creds
	}
	if s.CredentialsInSandbox {
		doc["credentials_in_sandbox"] = true
	}
	if s.AgentTelemetry {
		doc["agent_telemetry"] = true
	}
	if len(s.HardeningBestEffort) > 0 {
		doc["hardening_best_effort"] = s.HardeningBestEffort
	}
	if len(s.MCPServers) > 0 {
		doc["mcp_servers"] = normalizedServers(s.MCPServers)
	}
	var b strings.Builder
	if err := writePy(&b, doc); err != nil {
		return "", "", fmt.Errorf("normalising spec: %w", err)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return b.String(), hex.EncodeToString(sum[:])[:16], nil
}

func sortedEnv(in []EnvVar) []EnvVar {
	out := append([]EnvVar(nil), in...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// writePy writes v as Python's json.dumps(sort_keys=True,
// separators=(",", ":")) would.
func writePy(b *strings.Builder, v any) error {
	switch x := v.(type) {
	case string:
		writePyString(b, x)
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case []string:
		items := make([]any, len(x))
		for i, s := range x {
			items[i] = s
		}
		return writePyList(b, items)
	case []map[string]any:
		items := make([]any, len(x))
		for i, m := range x {
			items[i] = m
		}
		return writePyList(b, items)
	case map[string]any:
		return writePyObject(b, x)
	default:
		return fmt.Errorf("unexpected type %T", v)
	}
	return nil
}

func writePyList(b *strings.Builder, items []any) error {
	b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := writePy(b, it); err != nil {
			return err
		}
	}
	b.WriteByte(']')
	return nil
}

func writePyObject(b *strings.Builder, m map[string]any) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // Python sorts by code point; Go by byte: same for UTF-8
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		writePyString(b, k)
		b.WriteByte(':')
		if err := writePy(b, m[k]); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

// writePyString escapes as Python's ensure_ascii does: \" \\ \n \r \t \b
// \f, other controls and every non-ASCII code point as \uXXXX (astral
// ones as surrogate pairs); no HTML escaping, "/" left alone.
func writePyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			writePyRune(b, r)
		}
	}
	b.WriteByte('"')
}

func writePyRune(b *strings.Builder, r rune) {
	switch {
	case r >= 0x20 && r < 0x7f:
		b.WriteRune(r)
	case r > 0xffff:
		r1, r2 := utf16.EncodeRune(r)
		fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
	default:
		fmt.Fprintf(b, `\u%04x`, r)
	}
}
