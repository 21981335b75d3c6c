package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/probe"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/mcpsidecar/mcpsidecar/internal/verdict"
)

// A fake key: never a real one.
const fakeKey = "sk-test-held-by-the-gateway-0123456789abcdef"

func credentialJob(t *testing.T, inSandbox bool, workload orchestrate.Workload) *job {
	t.Helper()
	src := "schema_version = 1\ncapabilities = [\"network\", \"openai_agents\"]\n"
	if inSandbox {
		src += "credentials_in_sandbox = true\n"
	}
	s, err := spec.Load("test.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Resolve(s)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := runs.Create(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{orchestrate.RoleGateway, orchestrate.RoleAgent} {
		if _, err := dir.MkdirOutput(role, os.Getuid(), os.Getgid()); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"OPENAI_API_KEY": fakeKey}
	return &job{profile: p, dir: dir, getenv: func(k string) string { return env[k] }, o: Options{Workload: workload}}
}

// credentialChecks are the verdict's credential checks of j's record.
func credentialChecks(j *job) []runs.Check {
	places, held := j.credentials()
	r := j.record(nil, places, held)
	r.Started = true
	var out []runs.Check
	for _, c := range verdict.Judge(r).Checks {
		if c.Name == verdict.CheckHeldStayed || c.Name == verdict.CheckRefusedSeen {
			out = append(out, c)
		}
	}
	return out
}

func checkByName(checks []runs.Check, name string) *runs.Check {
	for i := range checks {
		if checks[i].Name == name {
			return &checks[i]
		}
	}
	return nil
}

func TestCredentialPlaces(t *testing.T) {
	j := credentialJob(t, false, orchestrate.WorkloadProbe)
	places, held := j.credentials()
	if len(places) != 1 || places[0] != (runs.Credential{Variable: "OPENAI_API_KEY", Host: "api.openai.com", Lives: spec.LivesGateway}) {
		t.Errorf("places %+v", places)
	}
	if len(held) != 1 || held[0].Value != fakeKey {
		t.Errorf("held %d values, want the key", len(held))
	}
	pc := j.probeContext()
	if len(pc.Credentials) != 1 || pc.Credentials[0].Lives != spec.LivesGateway || pc.Credentials[0].Variable != "OPENAI_API_KEY" {
		t.Errorf("probe context credentials %+v", pc.Credentials)
	}
	j = credentialJob(t, true, orchestrate.WorkloadProbe)
	if places, held := j.credentials(); len(places) != 1 || places[0].Lives != spec.LivesSandbox || len(held) != 0 {
		t.Errorf("credentials_in_sandbox: places %+v, %d held", places, len(held))
	}
	if got := credentialChecks(j); got != nil {
		t.Errorf("no credential held by the gateway, yet checks %+v", got)
	}
}

func TestHeldStayed(t *testing.T) {
	t.Run("clean record", func(t *testing.T) {
		j := credentialJob(t, false, orchestrate.WorkloadProbe)
		if err := j.dir.Write("stdout.txt", []byte("answer\n")); err != nil {
			t.Fatal(err)
		}
		c := checkByName(credentialChecks(j), verdict.CheckHeldStayed)
		if c == nil || !c.OK || !strings.Contains(c.Detail, "OPENAI_API_KEY is in none of") {
			t.Errorf("got %+v, want ok", c)
		}
	})
	t.Run("the key in a role's output, across a chunk boundary", func(t *testing.T) {
		j := credentialJob(t, false, orchestrate.WorkloadProbe)
		data := append(bytes.Repeat([]byte("x"), 1<<20-10), fakeKey...)
		if err := os.WriteFile(filepath.Join(j.dir.Path, orchestrate.RoleAgent, "leak.txt"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		c := checkByName(credentialChecks(j), verdict.CheckHeldStayed)
		if c == nil || c.OK || !strings.Contains(c.Detail, "OPENAI_API_KEY in agent/leak.txt") || strings.Contains(c.Detail, fakeKey) {
			t.Errorf("got %+v, want a failure naming the file, never the value", c)
		}
	})
	t.Run("the key on the workload's stdout", func(t *testing.T) {
		j := credentialJob(t, false, orchestrate.WorkloadProbe)
		j.stdout.Write([]byte("my key is " + fakeKey))
		if c := checkByName(credentialChecks(j), verdict.CheckHeldStayed); c == nil || c.OK || !strings.Contains(c.Detail, "in stdout") {
			t.Errorf("got %+v, want a failure naming stdout", c)
		}
	})
	t.Run("a planted link is not followed", func(t *testing.T) {
		j := credentialJob(t, false, orchestrate.WorkloadProbe)
		outside := filepath.Join(t.TempDir(), "key")
		os.WriteFile(outside, []byte(fakeKey), 0o644)
		if err := os.Symlink(outside, filepath.Join(j.dir.Path, orchestrate.RoleAgent, "link")); err != nil {
			t.Fatal(err)
		}
		if c := checkByName(credentialChecks(j), verdict.CheckHeldStayed); c == nil || !c.OK {
			t.Errorf("got %+v, want ok", c)
		}
	})
}

func TestRefusalsRecorded(t *testing.T) {
	line := func(cred, decision string) egress.Decision {
		return egress.Decision{Time: time.Now(), Method: "POST", Host: "api.openai.com", Port: 443, Decision: decision, Credential: cred}
	}
	tests := []struct {
		name   string
		lines  []egress.Decision
		wantOK bool
	}{
		{"both refused", []egress.Decision{line(egress.CredentialRefused, egress.Deny), line(egress.CredentialRefused, egress.Deny)}, true},
		{"one refused", []egress.Decision{line(egress.CredentialRefused, egress.Deny)}, false},
		{"one injected", []egress.Decision{line(egress.CredentialRefused, egress.Deny), line(egress.CredentialRefused, egress.Deny),
			line(egress.CredentialInjected, egress.Allow)}, false},
		{"no log", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := credentialJob(t, false, orchestrate.WorkloadCheck)
			if tt.lines != nil {
				var b bytes.Buffer
				log := egress.NewDecisionLog(&b)
				for _, d := range tt.lines {
					if err := log.Record(d); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.WriteFile(filepath.Join(j.dir.Path, orchestrate.RoleGateway, runs.FileDecisions), b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			c := checkByName(credentialChecks(j), verdict.CheckRefusedSeen)
			if c == nil || c.OK != tt.wantOK {
				t.Errorf("got %+v, want ok=%v", c, tt.wantOK)
			}
		})
	}
}

// TestPlaceholderContract: the harness writes the placeholder, the probe
// recognises it by shape alone; a renamed prefix or a new length on either
// side fails here.
func TestPlaceholderContract(t *testing.T) {
	for range 100 {
		if p := orchestrate.NewPlaceholder(); !probe.IsPlaceholder(p) {
			t.Fatalf("probe.IsPlaceholder(%q) = false for the harness's placeholder", p)
		}
	}
}
