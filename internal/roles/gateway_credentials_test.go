//go:build linux

package roles

import (
	"io"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// TestCredentialContract writes the gateway's credential environment with
// the harness's code and reads it with the gateway command's: the route
// survives, the value comes from the variable the route names, and every
// secret is removed from the gateway's environment once read.
func TestCredentialContract(t *testing.T) {
	s, err := spec.Load("t.toml", []byte("schema_version = 1\ncapabilities = [\"network\", \"openai_agents\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Resolve(s)
	if err != nil {
		t.Fatal(err)
	}
	host := map[string]string{"OPENAI_API_KEY": "sk-real", "OPENAI_BASE_URL": "https://models.example.com:8443/v1"}
	placeholder := orchestrate.NewPlaceholder()
	ce, err := orchestrate.Credentials(p, orchestrate.EngineOurs, func(k string) string { return host[k] }, placeholder)
	if err != nil {
		t.Fatal(err)
	}
	gwEnv := map[string]string{}
	for _, e := range ce.Gateway {
		gwEnv[e.Name] = e.Value
	}
	var unset []string
	in, err := loadInjection(func(k string) string { return gwEnv[k] }, func(k string) error { unset = append(unset, k); return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := egress.Credential{Host: "models.example.com", Port: 8443, Scheme: "https", Header: "Authorization",
		Format: "Bearer {value}", Value: "sk-real", Source: "OPENAI_API_KEY"}
	if len(in.Credentials) != 1 || in.Credentials[0] != want || in.Placeholder != placeholder {
		t.Errorf("injection %+v, want %+v", in, want)
	}
	if len(unset) != 2 {
		t.Errorf("unset %v, want the key and the placeholder", unset)
	}
	pol, _ := netpolicy.Compile(*p.Gateway)
	if _, err := egress.New(egress.Options{Policy: pol, Log: egress.NewDecisionLog(io.Discard), Injection: in}); err != nil {
		t.Errorf("the gateway refuses the harness's credentials: %v", err)
	}
}

func TestLoadInjectionRefusesGarbage(t *testing.T) {
	for _, raw := range []string{"", "{", `[{"host":"a","extra":1}]`} {
		_, err := loadInjection(func(k string) string {
			if k == spec.EnvGatewayCredentials {
				return raw
			}
			return ""
		}, func(string) error { return nil })
		if err == nil {
			t.Errorf("%q: accepted", raw)
		}
	}
}

// TestLoadInjectionSharedVariable: two credentials that name the same
// variable both get its value (it is unset only once every route has read
// it; red team, issue 26).
func TestLoadInjectionSharedVariable(t *testing.T) {
	env := map[string]string{
		spec.EnvGatewayCredentials: `[{"host":"a.example","scheme":"https","header":"Authorization","format":"Bearer {value}","from_env":"K"},` +
			`{"host":"b.example","scheme":"https","header":"X-Key","format":"{value}","from_env":"K"}]`,
		spec.EnvCredentialPlaceholder: "mcpsidecar-placeholder-0123456789abcdef", "K": "shared-secret-value",
	}
	in, err := loadInjection(func(k string) string { return env[k] }, func(k string) error { delete(env, k); return nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range in.Credentials {
		if c.Value != "shared-secret-value" {
			t.Errorf("credential for %s has value %q, want the shared one", c.Host, c.Value)
		}
	}
	if _, left := env["K"]; left {
		t.Error("the variable is still set")
	}
}
