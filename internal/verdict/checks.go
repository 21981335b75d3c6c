package verdict

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/probe"
	"github.com/mcpsidecar/mcpsidecar/internal/redact"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// Names of the checks of a user's own workload (run --image): its exit
// and the sidecar's audit; the checks of the answer (cited URLs, tools
// searched) stay with our agent, whose turns we can see.
const (
	CheckWorkloadExit  = "workload exited 0"
	CheckWorkloadAudit = "sidecar audit complete"
)

// Names of the host's credential checks.
const (
	CheckHeldStayed  = "credentials held by the gateway stayed there"
	CheckRefusedSeen = "gateway recorded the refused model requests"
)

// checkNoRoute is the row of `agent --check` that an engine older than 26
// cannot pass: such engines give containers on --internal networks a
// default route to the bridge (Docker's isolation rules drop what is
// forwarded through it, but the route is there).
const checkNoRoute = "no route out"

var tableSplit = regexp.MustCompile(`\s{2,}`)

// OwnWorkload is the verdict of a user's own workload: it exited 0, and,
// when the plan has a sidecar, the sidecar's audit is complete (without
// one there is no audit: a spec without mcp_client; red team, session 37,
// saw such a run fail on the audit of a sidecar that never existed).
func OwnWorkload(dir string, exitCode int, sidecar bool) []runs.Check {
	exit := runs.Check{Name: CheckWorkloadExit, OK: exitCode == 0, Detail: fmt.Sprintf("want 0, got %d", exitCode)}
	if !sidecar {
		return []runs.Check{exit}
	}
	return []runs.Check{exit, auditComplete(filepath.Join(dir, runs.FileAudit))}
}

// ReportCheck: every required layer enforced in the role's report. A role
// that wrote none fails, unless it never got far enough to write one and
// the run already failed for that (it exited non-zero).
func ReportCheck(role string, pol harden.Policy, h runs.RoleHardening, exit *int) runs.Check {
	c := runs.Check{Name: role + " hardening report lists every required layer"}
	if h.Source == "" {
		c.Detail = "no hardening report"
		if exit != nil && *exit != 0 {
			c.OK, c.Detail = true, fmt.Sprintf("no hardening report (the role exited with code %d)", *exit)
		}
		return c
	}
	enforced := map[string]bool{}
	for _, l := range h.Layers {
		enforced[l.Name] = enforced[l.Name] || l.Enforced
	}
	var missing []string
	for _, l := range pol.RequiredLayers() {
		if !enforced[l] {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		c.Detail = "required but not reported enforced: " + strings.Join(missing, ", ")
		return c
	}
	c.OK, c.Detail = true, strings.Join(pol.RequiredLayers(), ", ")
	return c
}

// ObservedCheck judges what the host read of the process. Two seccomp
// filters at least: Docker's profile and the role's own. A process that
// was not read fails with the reason: one the host could not prove to be
// the container's, could not read at all, or that ended first. It was
// not looked at, so it cannot pass, and what another process shows says
// nothing of the sandbox. (The Docker backend holds each role, hardened,
// until it is read: a role that ends fast is read before it runs.)
func ObservedCheck(role string, ob runs.Observation) runs.Check {
	c := runs.Check{Name: role + " hardening seen from outside"}
	if !ob.Seen {
		c.Detail = ob.Detail
		if c.Detail == "" {
			c.Detail = "not observed"
		}
		return c
	}
	var bad []string
	if ob.Seccomp != 2 || ob.SeccompFilters < 2 {
		bad = append(bad, fmt.Sprintf("seccomp mode %d with %d filter(s), want mode 2 with 2 or more", ob.Seccomp, ob.SeccompFilters))
	}
	if !ob.NoNewPrivs {
		bad = append(bad, "no_new_privs not set")
	}
	if strings.Trim(ob.CapEff, "0") != "" {
		bad = append(bad, "effective capabilities "+ob.CapEff)
	}
	if ob.UID == 0 {
		bad = append(bad, "runs as root")
	}
	if len(bad) > 0 {
		c.Detail = strings.Join(bad, "; ")
		return c
	}
	c.OK, c.Detail = true, fmt.Sprintf("seccomp filters %d, no_new_privs, no capabilities, uid %d", ob.SeccompFilters, ob.UID)
	return c
}

// auditComplete: the sidecar's audit log exists, every line is a whole
// record (time, kind, name, correlation id) and every call_start has its
// end line (interrupted ones are counted): the sidecar closed it cleanly. What the workload asked is not known to us, so completeness is
// the sidecar's side; the gateway's decision log records the rest.
func auditComplete(path string) runs.Check {
	c := runs.Check{Name: CheckWorkloadAudit}
	data, err := os.ReadFile(path)
	if err != nil {
		c.Detail = "no sidecar audit log: " + err.Error()
		return c
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	n := 0
	kinds := map[string]int{}
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r struct {
			Time          string `json:"time"`
			Kind          string `json:"kind"`
			Name          string `json:"name"`
			CorrelationID string `json:"correlation_id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			c.Detail = fmt.Sprintf("%s line %d: %v", filepath.Base(path), line, err)
			return c
		}
		if r.Time == "" || r.Kind == "" || r.Name == "" || r.CorrelationID == "" {
			c.Detail = fmt.Sprintf("%s line %d: an incomplete record (time, kind, name and correlation id are required)", filepath.Base(path), line)
			return c
		}
		n++
		kinds[r.Kind]++
	}
	if err := sc.Err(); err != nil {
		c.Detail = err.Error()
		return c
	}
	// A call_start with no end line: the sidecar was killed with the call
	// in flight, and the call reached its server with half a record.
	calls, err := ReadCalls(path)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	if d := calls.UnendedDetail(); d != "" {
		c.Detail = d
		return c
	}
	if calls.Interrupted > 0 {
		kinds["interrupted"] = calls.Interrupted
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, kinds[k]))
	}
	c.OK, c.Detail = true, fmt.Sprintf("%d audit lines, each a whole record (%s)", n, strings.Join(parts, ", "))
	return c
}

// HeldStayed: no file under dir and neither of the workload's streams
// holds a value the gateway held, as itself or in any form the record's
// encoders give it (redact.Forms: JSON-escaped, base64, percent-encoded).
func HeldStayed(dir string, held []HeldValue, stdout, stderr []byte) runs.Check {
	c := runs.Check{Name: CheckHeldStayed, OK: true}
	if len(held) == 0 {
		c.Detail = "no credential value on the host: nothing to look for"
		return c
	}
	names := held
	held = nil
	for _, h := range names {
		for _, f := range append([]string{h.Value}, redact.Forms(h.Value)...) {
			if !slices.ContainsFunc(held, func(o HeldValue) bool { return o.Value == f && o.Variable == h.Variable }) {
				held = append(held, HeldValue{Variable: h.Variable, Value: f})
			}
		}
	}
	var found []string
	for _, s := range []struct {
		name string
		data []byte
	}{{"stdout", stdout}, {"stderr", stderr}} {
		for _, h := range held {
			if bytes.Contains(s.data, []byte(h.Value)) {
				found = append(found, h.Variable+" in "+s.name)
			}
		}
	}
	files, err := searchDir(dir, held, func(rel, variable string) { found = append(found, variable+" in "+rel) })
	switch {
	case len(found) > 0:
		c.OK, c.Detail = false, "a held value is in the record: "+strings.Join(slices.Compact(found), ", ")
	case err != nil:
		c.OK, c.Detail = false, "searching the run directory: "+err.Error()
	default:
		c.Detail = fmt.Sprintf("the value of %s is in none of %d files of the run directory, nor in the workload's output", variables(names), files)
	}
	return c
}

func variables(held []HeldValue) string {
	var names []string
	for _, h := range held {
		names = append(names, h.Variable)
	}
	return strings.Join(names, ", ")
}

// SearchDir reports each value found in a regular file under root (as
// its Variable and the file's path relative to root), without following
// links, reading each file in chunks; it returns how many files it read.
func SearchDir(root string, values []HeldValue, found func(rel, variable string)) (files int, err error) {
	return searchDir(root, values, found)
}

// searchDir reports each held value found in a regular file under root,
// without following links, reading each file in chunks.
func searchDir(root string, held []HeldValue, found func(rel, variable string)) (files int, err error) {
	longest := 0
	for _, h := range held {
		longest = max(longest, len(h.Value))
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

func searchFile(p string, held []HeldValue, longest int) ([]string, error) {
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
			if !slices.Contains(hits, h.Variable) && bytes.Contains(buf, []byte(h.Value)) {
				hits = append(hits, h.Variable)
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

// RefusalsRecorded reads the gateway's decision log: doctor's check sent
// two model requests to the credential listener without the run's
// placeholder, so at least two lines must say the credential was refused,
// and none that it was injected.
func RefusalsRecorded(path string) runs.Check {
	c := runs.Check{Name: CheckRefusedSeen}
	data, err := readSmall(path)
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

// CheckTable turns the table `agent --check` printed (stdout) into
// checks. When the route is accepted (--allow-old-engine on an engine
// older than 26), a failed no-route row is a degradation, returned,
// instead of failing doctor; every other failure fails it.
func CheckTable(stdout string, exitCode int, acceptRoute bool) (checks []runs.Check, degradations []string) {
	rows := parseCheckTable(stdout)
	exit := runs.Check{Name: "agent --check exited 0", OK: exitCode == 0, Detail: fmt.Sprintf("exit code %d", exitCode)}
	if len(rows) == 0 {
		return []runs.Check{exit}, nil
	}
	onlyRoute := true
	for i, r := range rows {
		if r.OK {
			continue
		}
		if r.Name == checkNoRoute && acceptRoute {
			d := "agent --check: " + r.Detail + " (engine older than 26: containers on --internal networks keep a default route to the bridge; forwarding is dropped by Docker's isolation rules)"
			degradations = append(degradations, d)
			rows[i].OK, rows[i].Detail = true, "degraded: "+r.Detail
			continue
		}
		onlyRoute = false
	}
	if !exit.OK && onlyRoute {
		exit.OK, exit.Detail = true, exit.Detail+" (only the accepted degradation failed)"
	}
	return append([]runs.Check{exit}, rows...), degradations
}

// parseCheckTable reads "CHECK  RESULT  DETAIL" rows (columns separated by
// two or more spaces, RESULT "ok" or "FAIL").
func parseCheckTable(out string) []runs.Check {
	var rows []runs.Check
	for _, line := range strings.Split(out, "\n") {
		f := tableSplit.Split(strings.TrimSpace(line), 3)
		if len(f) < 2 || f[0] == "CHECK" {
			continue
		}
		var c runs.Check
		switch f[1] {
		case "ok":
			c.OK = true
		case "FAIL":
		default:
			continue
		}
		c.Name = f[0]
		if len(f) == 3 {
			c.Detail = f[2]
		}
		rows = append(rows, c)
	}
	return rows
}

// probeVerdict reads report.json: a violation anywhere is exit 4.
func probeVerdict(dir string) ([]runs.Check, error) {
	path := filepath.Join(dir, runs.FileProbeReport)
	r, err := probe.LoadReport(path)
	if errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("the probe suite wrote no report (%s)", path)
	}
	if err != nil {
		return []runs.Check{{Name: "report.json written", Detail: err.Error()}}, err
	}
	checks := []runs.Check{{Name: "report.json written", OK: true, Detail: fmt.Sprintf("%d probes", r.Probes())}}
	n := r.Violations()
	checks = append(checks, runs.Check{Name: "no isolation violation", OK: n == 0, Detail: fmt.Sprintf("%d violation(s)", n)})
	if n > 0 {
		return checks, exitcode.With(exitcode.Violation, fmt.Errorf("the probe suite found %d isolation violation(s); see %s", n, path))
	}
	return checks, nil
}

// probe adds test-sandbox's checks: the probe suite's report, and the
// backend's measures of the isolation, a failed one a violation (exit 4).
func (j *Judgement) probe(r Record) {
	c, err := probeVerdict(r.Dir)
	j.Checks = append(j.Checks, c...)
	for _, lc := range r.Isolation {
		j.Checks = append(j.Checks, lc)
		if !lc.OK && err == nil {
			err = exitcode.With(exitcode.Violation, fmt.Errorf("%s: %s", lc.Name, lc.Detail))
		}
	}
	if code, _ := exitcode.Of(err); r.RunErr != nil && code != exitcode.Violation {
		err = nil // timed out or interrupted: RunErr says so; a missing report follows from it
	}
	j.Err = err
}
