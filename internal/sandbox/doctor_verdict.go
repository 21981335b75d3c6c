package sandbox

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/mcpsidecar/mcpsidecar/internal/enginever"
	"github.com/mcpsidecar/mcpsidecar/internal/runs"
)

// checkNoRoute is the row of `agent --check` that an engine older than 26
// cannot pass: such engines give containers on --internal networks a
// default route to the bridge (Docker's isolation rules drop what is
// forwarded through it, but the route is there).
const checkNoRoute = "no route out"

var tableSplit = regexp.MustCompile(`\s{2,}`)

// checkVerdict turns the table `agent --check` printed into checks. With
// --allow-old-engine, a failed no-route row is recorded as a degradation
// instead of failing doctor; every other failure fails it.
func (j *job) checkVerdict() []runs.Check {
	rows := parseCheckTable(string(j.stdout.Bytes()))
	exit := runs.Check{Name: "agent --check exited 0", OK: *j.agentExit == 0, Detail: fmt.Sprintf("exit code %d", *j.agentExit)}
	if len(rows) == 0 {
		return []runs.Check{exit}
	}
	onlyRoute := true
	for i, r := range rows {
		if r.OK {
			continue
		}
		if r.Name == checkNoRoute && j.o.AllowOldEngine && j.oldEngine() {
			d := "agent --check: " + r.Detail + " (engine older than 26: containers on --internal networks keep a default route to the bridge; forwarding is dropped by Docker's isolation rules)"
			j.meta.Degradations = append(j.meta.Degradations, d)
			fmt.Fprintf(j.s.Err, "warning: %s\n", d)
			rows[i].OK, rows[i].Detail = true, "degraded: "+r.Detail
			continue
		}
		onlyRoute = false
	}
	if !exit.OK && onlyRoute {
		exit.OK, exit.Detail = true, exit.Detail+" (only the accepted degradation failed)"
	}
	return append([]runs.Check{exit}, rows...)
}

func (j *job) oldEngine() bool {
	return enginever.Before(j.meta.Engine.Version, minEngineMajor)
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
