package egress

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// SquidLogFormat is the access-log format the Squid engine's squid.conf
// declares (internal/spec writes it; its tests and this parser's keep the
// two in step). Squid does not JSON-escape, so the parser is lenient about
// bare numeric fields such as "000" or "-".
const SquidLogFormat = `{"time":"%{%Y-%m-%dT%H:%M:%S}tg.%03tuZ","client":"%>a",` +
	`"method":"%rm","url":"%ru","status":%>Hs,"squid_status":"%Ss","server_ip":"%<a",` +
	`"bytes_up":%>st,"bytes_down":%<st,"duration_ms":%tr,"traceparent":"%{traceparent}>h"}`

// squidLine is one access-log line, every field as text.
type squidLine struct {
	Time        string `json:"time"`
	Client      string `json:"client"`
	Method      string `json:"method"`
	URL         string `json:"url"`
	Status      string `json:"status"`
	SquidStatus string `json:"squid_status"`
	ServerIP    string `json:"server_ip"`
	BytesUp     string `json:"bytes_up"`
	BytesDown   string `json:"bytes_down"`
	DurationMS  string `json:"duration_ms"`
	Traceparent string `json:"traceparent"`
}

// bareValue matches the numeric fields Squid writes unquoted.
var bareValue = regexp.MustCompile(`("(?:status|bytes_up|bytes_down|duration_ms)":)([^",}]*)`)

// ParseSquidAccessLog reads a Squid access log written in [SquidLogFormat]
// and returns one [Decision] per line. Squid does not say which rule
// allowed a request or why it denied one, so Rule is empty and Reason is
// Squid's result code. Malformed lines are skipped and reported, each with
// its line number, in the returned error.
func ParseSquidAccessLog(r io.Reader) ([]Decision, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []Decision
	var errs []error
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		d, err := parseSquidLine(text)
		if err != nil {
			errs = append(errs, fmt.Errorf("access log line %d: %w", n, err))
			continue
		}
		out = append(out, d)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("reading access log: %w", err))
	}
	return out, errors.Join(errs...)
}

func parseSquidLine(text string) (Decision, error) {
	var l squidLine
	dec := json.NewDecoder(strings.NewReader(bareValue.ReplaceAllString(text, `$1"$2"`)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Decision{}, fmt.Errorf("not in the mcpsidecar log format: %w", err)
	}
	t, err := time.Parse("2006-01-02T15:04:05.000Z", l.Time)
	if err != nil {
		return Decision{}, fmt.Errorf("time %q: %w", l.Time, err)
	}
	d := Decision{Time: t, Client: dash(l.Client), Method: l.Method, ResolvedIP: dash(l.ServerIP),
		CorrelationID: traceID([]string{l.Traceparent})}
	d.Host, d.Port = squidTarget(l.Method, l.URL)
	d.BytesUp, d.BytesDown = number(l.BytesUp), number(l.BytesDown)
	d.DurationMS = float64(number(l.DurationMS))
	d.Decision = Allow
	if l.Status == "403" || strings.HasPrefix(l.SquidStatus, "TCP_DENIED") || strings.HasPrefix(l.SquidStatus, "NONE_NONE") {
		d.Decision = Deny
		d.Reason = "squid: " + l.SquidStatus + "/" + l.Status
	}
	return d, nil
}

// squidTarget extracts host and port from Squid's %ru: "host:port" for
// CONNECT, an absolute URL otherwise.
func squidTarget(method, raw string) (string, uint16) {
	hostport := raw
	if method != "CONNECT" {
		u, err := url.Parse(raw)
		if err != nil {
			return raw, 0
		}
		hostport = u.Host
		if u.Port() == "" {
			hostport = net.JoinHostPort(u.Hostname(), defaultPort(u.Scheme))
		}
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return raw, 0
	}
	if h, err := netpolicy.NormalizeHost(host); err == nil {
		host = h
	}
	return host, uint16(number(port))
}

func dash(s string) string {
	if s == "-" {
		return ""
	}
	return s
}

// number parses a Squid numeric field; "-" and garbage count as 0.
func number(s string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
