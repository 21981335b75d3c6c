package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcpsidecar/mcpsidecar/internal/dockerx"
	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/exitcode"
	"github.com/mcpsidecar/mcpsidecar/internal/orchestrate"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// imageEngine answers InspectImage from a set; any other call panics.
type imageEngine struct {
	dockerx.Engine
	have map[string]bool
	err  error
}

func (e imageEngine) InspectImage(_ context.Context, ref string) (dockerx.ImageInfo, bool, error) {
	return dockerx.ImageInfo{}, e.have[ref], e.err
}

func TestCheckGateway(t *testing.T) {
	withNet, err := spec.Resolve(&spec.Spec{Source: "<t>", SchemaVersion: 1, Capabilities: []string{spec.CapNetwork},
		AllowedDomains: []string{".example.com"}, AllowedIPs: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	noNet, err := spec.Resolve(&spec.Spec{Source: "<t>", SchemaVersion: 1, Capabilities: []string{}, AllowedDomains: []string{}, AllowedIPs: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		profile      *spec.Profile
		engine, img  string
		eng          imageEngine
		wantCode     int
		wantErr      string
		wantEngine   string
		degradations int
	}{
		{"ours", withNet, orchestrate.EngineOurs, "", imageEngine{}, exitcode.OK, "", "ours", 0},
		{"no gateway, ours", noNet, orchestrate.EngineOurs, "", imageEngine{}, exitcode.OK, "", "", 0},
		{"squid present", withNet, orchestrate.EngineSquid, egress.SquidImage, imageEngine{have: map[string]bool{egress.SquidImage: true}}, exitcode.OK, "", "squid", 2},
		{"squid absent", withNet, orchestrate.EngineSquid, orchestrate.DefaultSquidImage, imageEngine{}, exitcode.Unavailable, egress.SquidImage + " is not on this Docker engine", "squid", 0},
		{"inspect fails", withNet, orchestrate.EngineSquid, egress.SquidImage, imageEngine{err: errors.New("daemon gone")}, exitcode.Unavailable, "daemon gone", "squid", 0},
		{"squid without gateway", noNet, orchestrate.EngineSquid, egress.SquidImage, imageEngine{}, exitcode.Usage, "no network capability", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &job{s: Output{Out: io.Discard, Err: io.Discard}, o: Options{GatewayEngine: tt.engine, SquidImage: tt.img},
				profile: tt.profile, engine: tt.eng}
			err := j.checkGateway(context.Background())
			code, hint := exitcode.Of(err)
			if err == nil {
				code = exitcode.OK
			}
			if code != tt.wantCode || (tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("got %v (code %d), want code %d and %q", err, code, tt.wantCode, tt.wantErr)
			}
			if tt.name == "squid absent" && (!strings.Contains(hint, "scripts/build-squid-image.sh") || !strings.Contains(hint, "--squid-image "+egress.SquidImage)) {
				t.Errorf("hint %q does not name the build script and the local image", hint)
			}
			got := ""
			if j.meta.Gateway != nil {
				got = j.meta.Gateway.Engine
			}
			if got != tt.wantEngine || len(j.meta.Degradations) != tt.degradations {
				t.Errorf("gateway engine %q, %d degradations; want %q, %d", got, len(j.meta.Degradations), tt.wantEngine, tt.degradations)
			}
		})
	}
}

func TestOutputOwner(t *testing.T) {
	tests := []struct {
		user     string
		uid, gid int
	}{
		{spec.User, orchestrate.ImageUID, orchestrate.ImageGID},
		{egress.SquidUser, 13, 13},
		{"proxy", orchestrate.ImageUID, orchestrate.ImageGID},
		{"13:x", orchestrate.ImageUID, orchestrate.ImageGID},
		{"", orchestrate.ImageUID, orchestrate.ImageGID},
	}
	for _, tt := range tests {
		t.Run(tt.user, func(t *testing.T) {
			uid, gid := outputOwner(orchestrate.Step{Spec: dockerx.ContainerSpec{User: tt.user}})
			if uid != tt.uid || gid != tt.gid {
				t.Errorf("owner %d:%d, want %d:%d", uid, gid, tt.uid, tt.gid)
			}
		})
	}
}

// TestSquidDecisions: access-log lines become decision lines with the
// run id; the readiness connect (no request) is dropped; a malformed line
// is reported with its number while the others are kept.
func TestSquidDecisions(t *testing.T) {
	raw := strings.Join([]string{
		`{"time":"2026-11-29T09:39:11.846Z","client":"172.17.0.1","method":"-","url":"error:transaction-end-before-headers","status":0,"squid_status":"NONE_NONE","server_ip":"-","bytes_up":0,"bytes_down":0,"duration_ms":0,"traceparent":"-"}`,
		`{"time":"2026-11-29T09:39:12.000Z","client":"10.0.0.3","method":"CONNECT","url":"api.example.com:443","status":200,"squid_status":"TCP_TUNNEL","server_ip":"93.184.215.14","bytes_up":51,"bytes_down":153,"duration_ms":12,"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
		`not json`,
		`{"time":"2026-11-29T09:39:13.000Z","client":"10.0.0.3","method":"GET","url":"http://probe.invalid/","status":403,"squid_status":"TCP_DENIED","server_ip":"-","bytes_up":129,"bytes_down":3460,"duration_ms":0,"traceparent":"-"}`,
	}, "\n") + "\n"
	out, err := squidDecisions([]byte(raw), "run-x")
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("error %v, want one naming line 3", err)
	}
	var got []egress.Decision
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var d egress.Decision
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("decoding %q: %v", out, err)
		}
		got = append(got, d)
	}
	want := []egress.Decision{
		{Time: time.Date(2026, 11, 29, 9, 39, 12, 0, time.UTC), RunID: "run-x", Client: "10.0.0.3", Method: "CONNECT",
			Host: "api.example.com", Port: 443, ResolvedIP: "93.184.215.14", Decision: egress.Allow, BytesUp: 51, BytesDown: 153,
			DurationMS: 12, CorrelationID: "4bf92f3577b34da6a3ce929d0e0e4736"},
		{Time: time.Date(2026, 11, 29, 9, 39, 13, 0, time.UTC), RunID: "run-x", Client: "10.0.0.3", Method: "GET",
			Host: "probe.invalid", Port: 80, Decision: egress.Deny, Reason: "squid: TCP_DENIED/403", BytesUp: 129, BytesDown: 3460},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(egress.Decision{})); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
}
