package agent

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// EnvCABundle is the host variable naming the PEM bundle the image trusts
// (read by the CLI when it builds the image; named here in hints).
const EnvCABundle = spec.EnvCABundle

// gatewayDenied and gatewayUpstream start the bodies of the egress
// gateway's own answers (internal/egress: refuse, failUpstream); Squid
// marks its refusals with the X-Squid-Error header instead.
const (
	gatewayDenied   = "mcpsidecar egress gateway: denied: "
	gatewayUpstream = "mcpsidecar egress gateway: upstream: "
)

// modelError is a model request answered with an error status: by the
// model service (its error object), or by the egress gateway in front of
// it (its reason). Its text says which, in the service's own words.
type modelError struct {
	Status int
	// URL is the request's URL (scheme and host give the spec entry).
	URL *url.URL
	// Message, Type, Code and Param are the service's error object.
	Message, Type, Code, Param string
	// Gateway is the egress gateway's reason, when it answered itself;
	// Denied when that answer is a policy refusal no retry can change.
	Gateway string
	Denied  bool
	// Body is the first line of a body that is neither of the above.
	Body       string
	RetryAfter string
	// Retries is how many times the request was sent again before this.
	Retries int
}

// newModelError reads an error response (the body at most 64 KiB).
func newModelError(u *url.URL, resp *http.Response) *modelError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &modelError{Status: resp.StatusCode, URL: upstreamURL(u), RetryAfter: resp.Header.Get("Retry-After")}
	text := strings.TrimSpace(string(body))
	var obj struct {
		Error *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
			Param   any    `json:"param"`
		} `json:"error"`
	}
	switch squid := resp.Header.Get("X-Squid-Error"); {
	case strings.HasPrefix(text, gatewayDenied):
		// A policy refusal cannot change; the gateway being at capacity
		// (503) can.
		e.Gateway, e.Denied = firstLine(strings.TrimPrefix(text, gatewayDenied)), resp.StatusCode != http.StatusServiceUnavailable
	case strings.HasPrefix(text, gatewayUpstream):
		e.Gateway = firstLine(strings.TrimPrefix(text, gatewayUpstream))
	case squid != "":
		e.Gateway = "Squid " + squid
		e.Denied = strings.HasPrefix(squid, "ERR_ACCESS_DENIED") || strings.HasPrefix(squid, "ERR_DNS_FAIL")
	case json.Unmarshal(body, &obj) == nil && obj.Error != nil:
		e.Message, e.Type = obj.Error.Message, obj.Error.Type
		e.Code, e.Param = scalar(obj.Error.Code), scalar(obj.Error.Param)
	default:
		e.Body = firstLine(text)
	}
	return e
}

// upstreamURL is the model server a request is for. Through the gateway's
// credential listener (issue 15) the agent's URL is
// http://egress-gateway:3129/HOST[:PORT]/path: the host to name, and to
// allow, is HOST (https is the listener's default scheme).
func upstreamURL(u *url.URL) *url.URL {
	if u.Host != net.JoinHostPort(spec.GatewayAlias, strconv.Itoa(spec.CredentialPort)) {
		return u
	}
	seg, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if seg == "" {
		return u
	}
	return &url.URL{Scheme: "https", Host: seg}
}

// scalar prints a JSON code or param (a string, a number, or null).
func scalar(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	return fmt.Sprint(v)
}

// retryable: what can change by asking again (408, 429, 5xx), but not a
// refusal by the gateway's policy.
func (e *modelError) retryable() bool {
	if e.Denied {
		return false
	}
	return e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests || e.Status >= 500
}

func (e *modelError) Error() string {
	var b strings.Builder
	host := displayHost(e.URL)
	switch {
	case e.Denied:
		fmt.Fprintf(&b, "the egress gateway refused the model host %s (%d): %s; to allow it, add %s in the spec",
			host, e.Status, e.Gateway, specEntry(e.URL))
	case e.Gateway != "":
		fmt.Fprintf(&b, "the egress gateway answered %d for the model host %s: %s", e.Status, host, e.Gateway)
	case e.Message != "":
		fmt.Fprintf(&b, "model API at %s answered %d %s: %s", host, e.Status, http.StatusText(e.Status), e.Message)
		var attrs []string
		for _, a := range [][2]string{{"type", e.Type}, {"code", e.Code}, {"param", e.Param}} {
			if a[1] != "" {
				attrs = append(attrs, a[0]+" "+a[1])
			}
		}
		if len(attrs) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(attrs, ", "))
		}
	default:
		fmt.Fprintf(&b, "model API at %s answered %d %s", host, e.Status, http.StatusText(e.Status))
		if e.Body != "" {
			fmt.Fprintf(&b, ": %s", e.Body)
		}
	}
	if e.Retries > 0 {
		fmt.Fprintf(&b, "; gave up after %d %s", e.Retries, plural(e.Retries, "retry", "retries"))
		if e.RetryAfter != "" {
			fmt.Fprintf(&b, " (last Retry-After: %s)", e.RetryAfter)
		}
	}
	if hint := e.hint(); hint != "" {
		b.WriteString("; " + hint)
	}
	return b.String()
}

// hint names the setting to look at for statuses that point at one.
func (e *modelError) hint() string {
	switch {
	case e.Gateway != "":
		return ""
	case e.Status == http.StatusUnauthorized:
		return "check " + EnvAPIKey + " (it must be a key for " + EnvBaseURL + ")"
	case e.Code == "model_not_found" || (e.Status == http.StatusNotFound && e.Message != ""):
		return "check " + EnvModel
	case e.Status == http.StatusNotFound:
		return "check " + EnvBaseURL + " (it should end in /v1)"
	}
	return ""
}

// displayHost is u's host, with its port only when not the scheme's default.
func displayHost(u *url.URL) string {
	if p := u.Port(); (u.Scheme == "https" && p == "443") || (u.Scheme == "http" && p == "80") {
		return u.Hostname()
	}
	return u.Host
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// specEntry is the allowlist entry that would let the gateway reach u:
// the host (with its port when not the scheme's default), in
// allowed_domains or, for an address, allowed_ip_addresses.
func specEntry(u *url.URL) string {
	host, port := u.Hostname(), u.Port()
	if (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		port = ""
	}
	key := "allowed_domains"
	entry := strings.ToLower(host)
	if _, err := netip.ParseAddr(host); err == nil {
		key = "allowed_ip_addresses"
	}
	if port != "" {
		entry = net.JoinHostPort(entry, port)
	}
	return fmt.Sprintf("%q to %s", entry, key)
}

// connectRefusal turns a gateway's non-200 answer to CONNECT into a
// [modelError] (the standard library would keep only its status text).
func connectRefusal(_ context.Context, _ *url.URL, req *http.Request, resp *http.Response) error {
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	return newModelError(&url.URL{Scheme: "https", Host: req.Host}, resp)
}

// connectionReset reports a transport error worth one more attempt: the
// peer reset or dropped the connection mid-request.
func connectionReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF)
}

// explainModelErr gives a failed model request its plainest text: the
// model or gateway answer as such, or a transport error with a hint when
// a certificate is signed by an authority the image does not trust.
func explainModelErr(err error) error {
	var me *modelError
	if errors.As(err, &me) {
		return me
	}
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		return fmt.Errorf("%w; the model's certificate is signed by an authority the sandbox does not trust: behind a TLS-inspecting proxy or with a private CA, set %s on the host to a PEM bundle that includes it", err, EnvCABundle)
	}
	return err
}

// parseRetryAfter reads Retry-After as seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
