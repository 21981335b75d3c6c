package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/probe"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// heldValue is one credential value the gateway held, kept in memory for
// the host's own checks and never written.
type heldValue struct{ variable, value string }

// credentials is where each credential of the run lives and the values
// the gateway holds. orchestrate.Credentials decides both from the profile,
// the engine and the host's variables alone, so asking it again here gives
// what planInput gave the containers.
func (j *job) credentials() (places []runs.Credential, held []heldValue) {
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
			held = append(held, heldValue{e.Name, e.Value})
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

// Names of the host's credential checks.
const (
	checkHeldStayed  = "credentials held by the gateway stayed there"
	checkRefusedSeen = "gateway recorded the refused model requests"
)

// credentialChecks prove from the host what the probes claim from inside:
// no file of the run directory (each role's own output folder included, as
// the container wrote it, before any redaction) and neither of the
// workload's streams holds the value of a credential the gateway held.
// For doctor it also checks that the gateway recorded the model requests
// `agent --check` sent without the placeholder as refused, and injected
// nothing. Threat: a key that reached the sandbox, or a gateway that
// logged it, leaves it in a record shared for review.
func (j *job) credentialChecks() []runs.Check {
	places, held := j.credentials()
	if !slices.ContainsFunc(places, func(p runs.Credential) bool { return p.Lives == spec.LivesGateway }) {
		return nil
	}
	checks := []runs.Check{j.heldStayed(held)}
	if j.o.Workload == orchestrate.WorkloadCheck {
		checks = append(checks, j.refusalsRecorded())
	}
	return checks
}

func (j *job) heldStayed(held []heldValue) runs.Check {
	c := runs.Check{Name: checkHeldStayed, OK: true}
	if len(held) == 0 {
		c.Detail = "no credential value on the host: nothing to look for"
		return c
	}
	var found []string
	for _, s := range []struct {
		name string
		data []byte
	}{{"stdout", j.stdout.Bytes()}, {"stderr", j.stderr.Bytes()}} {
		for _, h := range held {
			if bytes.Contains(s.data, []byte(h.value)) {
				found = append(found, h.variable+" in "+s.name)
			}
		}
	}
	files, err := searchDir(j.dir.Path, held, func(rel, variable string) { found = append(found, variable+" in "+rel) })
	switch {
	case len(found) > 0:
		c.OK, c.Detail = false, "a held value is in the record: "+strings.Join(found, ", ")
	case err != nil:
		c.OK, c.Detail = false, "searching the run directory: "+err.Error()
	default:
		c.Detail = fmt.Sprintf("the value of %s is in none of %d files of the run directory, nor in the workload's output", variables(held), files)
	}
	return c
}

func variables(held []heldValue) string {
	var names []string
	for _, h := range held {
		names = append(names, h.variable)
	}
	return strings.Join(names, ", ")
}

// searchDir reports each held value found in a regular file under root,
// without following links, reading each file in chunks.
func searchDir(root string, held []heldValue, found func(rel, variable string)) (files int, err error) {
	longest := 0
	for _, h := range held {
		longest = max(longest, len(h.value))
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, p)
		hits, err := searchFile(p, held, longest)
		for _, v := range hits {
			found(rel, v)
		}
		return err
	})
	return files, err
}

func searchFile(p string, held []heldValue, longest int) ([]string, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|runs.NoFollow|runs.NonBlock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var hits []string
	buf := make([]byte, 0, 1<<20+longest)
	chunk := make([]byte, 1<<20)
	for {
		n, rerr := f.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for _, h := range held {
			if !slices.Contains(hits, h.variable) && bytes.Contains(buf, []byte(h.value)) {
				hits = append(hits, h.variable)
			}
		}
		if keep := longest - 1; len(buf) > keep {
			buf = append(buf[:0], buf[len(buf)-keep:]...)
		}
		if rerr == io.EOF {
			return hits, nil
		}
		if rerr != nil {
			return hits, rerr
		}
	}
}

// refusalsRecorded reads the gateway's decision log: doctor's check sent
// two model requests to the credential listener without the run's
// placeholder, so at least two lines must say the credential was refused,
// and none that it was injected.
func (j *job) refusalsRecorded() runs.Check {
	c := runs.Check{Name: checkRefusedSeen}
	data, err := j.dir.ReadOutput(orchestrate.RoleGateway, runs.FileDecisions)
	if err != nil {
		c.Detail = "reading the gateway's decision log: " + err.Error()
		return c
	}
	refused, injected := 0, 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var d struct {
			Decision   string `json:"decision"`
			Credential string `json:"credential"`
		}
		if json.Unmarshal(sc.Bytes(), &d) != nil {
			continue
		}
		switch {
		case d.Credential == egress.CredentialRefused && d.Decision == egress.Deny:
			refused++
		case d.Credential == egress.CredentialInjected:
			injected++
		}
	}
	c.OK = refused >= 2 && injected == 0
	c.Detail = fmt.Sprintf("%d model requests refused for want of the placeholder, %d with the credential injected (want at least 2 and 0)", refused, injected)
	return c
}
