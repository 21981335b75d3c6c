//go:build linux

package egress

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/testutil"
)

// TestParseSquidAccessLogGolden parses an access log that Debian's Squid
// 5.7 wrote with the generated squid.conf (allowed GET and CONNECT, a
// denied name, a private answer, a metadata literal, port 22).
func TestParseSquidAccessLogGolden(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "squid-access.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ds, err := ParseSquidAccessLog(f)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	for _, d := range ds {
		b, _ := json.Marshal(d)
		got.Write(append(b, '\n'))
	}
	testutil.Golden(t, filepath.Join("testdata", "squid-access.golden.jsonl"), got.Bytes()) // the decisions
}

func TestParseSquidAccessLogMalformed(t *testing.T) {
	good := `{"time":"2026-11-29T09:02:47.245Z","client":"127.0.0.1","method":"GET","url":"http://a.test/","status":403,"squid_status":"TCP_DENIED","server_ip":"-","bytes_up":1,"bytes_down":2,"duration_ms":0,"traceparent":"-"}`
	cases := []struct{ name, line, want string }{
		{"not json", "1732871234.123 5 127.0.0.1 TCP_DENIED/403 GET http://a.test/", "line 2: not in the mcpsidecar log format"},
		{"unknown field", strings.Replace(good, `"client"`, `"cliente"`, 1), "line 2: not in the mcpsidecar log format"},
		{"bad time", strings.Replace(good, "2026-11-29T09:02:47.245Z", "yesterday", 1), `line 2: time "yesterday"`},
		{"truncated", good[:60], "line 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := ParseSquidAccessLog(strings.NewReader(good + "\n" + tc.line + "\n\n" + good + "\n"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to contain %q", err, tc.want)
			}
			if len(ds) != 2 {
				t.Errorf("%d decisions, want the 2 good lines kept", len(ds))
			}
		})
	}
}

func TestParseSquidBareValues(t *testing.T) {
	line := `{"time":"2026-11-29T09:02:47.245Z","client":"-","method":"CONNECT","url":"API.Allowed.test:443","status":000,"squid_status":"NONE_NONE_ABORTED","server_ip":"-","bytes_up":-,"bytes_down":0,"duration_ms":5004,"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`
	ds, err := ParseSquidAccessLog(strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	d := ds[0]
	if d.Host != "api.allowed.test" || d.Port != 443 || d.Decision != Deny || d.BytesUp != 0 || d.CorrelationID != testTraceID || d.DurationMS != 5004 {
		t.Errorf("decision %+v", d)
	}
}
