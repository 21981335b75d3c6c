package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/egress"
	"github.com/mcpsidecar/mcpsidecar/internal/netpolicy"
)

// modelCase is one way a model request fails, served by handler at base
// (a path under the test server, or a reserved name reached through it
// as a proxy: no lookup, no packet leaves the machine).
type modelCase struct {
	name    string
	base    string // OPENAI_BASE_URL; "" is the test server itself
	proxy   bool   // the test server is the proxy (the gateway)
	retries int
	handler http.HandlerFunc
}

func openAIError(status int, retryAfter, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func gatewayRefusal(status int, reason string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, "%s%s\n", gatewayDenied, reason)
	}
}

var modelCases = []modelCase{
	{name: "gateway refusal (CONNECT)", base: "https://api.model.test/v1", proxy: true,
		handler: gatewayRefusal(403, `host "api.model.test" is not in allowed_domains`)},
	{name: "gateway refusal (plain HTTP, a port)", base: "http://models.test:11434/v1", proxy: true,
		handler: gatewayRefusal(403, `port 11434 is not allowed for models.test`)},
	{name: "gateway refusal (Squid)", base: "https://api.model.test/v1", proxy: true,
		handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Squid-Error", "ERR_ACCESS_DENIED 0")
			w.WriteHeader(403)
			io.WriteString(w, "<html>Access Denied</html>")
		}},
	{name: "OpenAI 400", handler: openAIError(400, "", `{"error":{"message":"Invalid schema for function 'get_html_element_name': In context=(), object schema missing properties.","type":"invalid_request_error","param":"tools[1].function.parameters","code":"invalid_function_parameters"}}`)},
	{name: "429 with Retry-After", retries: 1, handler: openAIError(429, "1", `{"error":{"message":"Rate limit reached for gpt-4.1-mini on requests per min (RPM): Limit 3, Used 3, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)},
	{name: "401", handler: openAIError(401, "", `{"error":{"message":"Incorrect API key provided: sk-test-***************6789. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)},
	{name: "401 echoing the key", handler: openAIError(401, "", `{"error":{"message":"bad key `+testKey+`","type":"auth"}}`)},
	{name: "404 not JSON", handler: func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }},
}

// The errors a user sees when the model request fails, pinned: the
// gateway's refusal with the entry that would allow the host, the
// service's own message, type and code, retries and Retry-After, the key
// never shown.
func TestModelErrorsGolden(t *testing.T) {
	var out bytes.Buffer
	for _, mc := range modelCases {
		cfg, _, _ := setup(t, "task")
		srv := httptest.NewServer(mc.handler)
		t.Cleanup(srv.Close)
		cfg.BaseURL = srv.URL + "/v1"
		if mc.base != "" {
			cfg.BaseURL = mc.base
		}
		if mc.proxy {
			pu, _ := url.Parse(srv.URL)
			sidecar, _ := url.Parse(cfg.SidecarURL)
			cfg.Proxy = func(u *url.URL) (*url.URL, error) {
				if u.Host == sidecar.Host {
					return nil, nil
				}
				return pu, nil
			}
		}
		cfg.MaxRetries = mc.retries
		var stderr bytes.Buffer
		err := Run(context.Background(), cfg, &bytes.Buffer{}, &stderr)
		if err == nil {
			t.Fatalf("%s: Run succeeded", mc.name)
		}
		got := strings.ReplaceAll(err.Error(), srv.Listener.Addr().String(), "MODEL")
		fmt.Fprintf(&out, "%s:\n  %s\n", mc.name, got)
		if s := strings.ReplaceAll(stderr.String(), srv.Listener.Addr().String(), "MODEL"); s != "" {
			fmt.Fprintf(&out, "  stderr: %s", s)
		}
		if strings.Contains(got+stderr.String(), testKey) {
			t.Errorf("%s: the API key is in the error", mc.name)
		}
		turns := readTurns(t, cfg.OutputDir)
		if first := turns[0]; first.Kind != KindModelRequest || first.OK || first.Error == "" {
			t.Errorf("%s: first turn %+v, want a failed model_request with its error", mc.name, first)
		}
	}
	golden(t, "model-errors.txt", out.Bytes())
}

// A gateway refusal is not retried: it cannot change.
func TestGatewayRefusalNotRetried(t *testing.T) {
	cfg, _, _ := setup(t, "task")
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		gatewayRefusal(502, "resolving api.model.test: no such host")(w, r)
	}))
	t.Cleanup(srv.Close)
	pu, _ := url.Parse(srv.URL)
	cfg.BaseURL = "http://api.model.test/v1"
	cfg.Proxy = func(u *url.URL) (*url.URL, error) {
		if u.Host == "api.model.test" {
			return pu, nil
		}
		return nil, nil
	}
	cfg.RetryBase = time.Millisecond
	err := Run(context.Background(), cfg, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || calls != 1 {
		t.Errorf("Run err %v after %d calls, want a refusal after 1", err, calls)
	}
}

// refusingResolver answers no name: the gateway under test never looks
// anything up outside the process.
type refusingResolver struct{}

func (refusingResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return nil, errors.New("no lookups in this test")
}

// Contract with internal/egress: the real gateway's refusals (CONNECT and
// plain HTTP) are recognised as refusals, never retried, and name the
// entry that would allow the host.
func TestRealGatewayRefusal(t *testing.T) {
	pol, err := netpolicy.Compile(netpolicy.NewConfig(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	g, err := egress.New(egress.Options{Policy: pol, Log: egress.NewDecisionLog(io.Discard), Resolver: refusingResolver{}})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	pu, _ := url.Parse(gw.URL)
	for _, base := range []string{"https://api.model.test/v1", "http://models.test:8000/v1"} {
		cfg, _, _ := setup(t, "task")
		cfg.BaseURL = base
		sidecar, _ := url.Parse(cfg.SidecarURL)
		cfg.Proxy = func(u *url.URL) (*url.URL, error) {
			if u.Host == sidecar.Host {
				return nil, nil
			}
			return pu, nil
		}
		var stderr bytes.Buffer
		err := Run(context.Background(), cfg, &bytes.Buffer{}, &stderr)
		var me *modelError
		if !errors.As(err, &me) || !me.Denied || stderr.Len() != 0 {
			t.Errorf("%s: Run error %v (stderr %q), want a gateway refusal, not retried", base, err, stderr.String())
			continue
		}
		u, _ := url.Parse(base)
		if want := specEntry(u); !strings.Contains(err.Error(), "to allow it, add "+want) {
			t.Errorf("%s: %v, want the entry %s", base, err, want)
		}
	}
}

// A model certificate from an unknown authority names the CA bundle.
func TestUnknownAuthorityNamesCABundle(t *testing.T) {
	cfg, _, _ := setup(t, "task")
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	cfg.BaseURL = srv.URL + "/v1"
	err := Run(context.Background(), cfg, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "unknown authority") || !strings.Contains(err.Error(), EnvCABundle) {
		t.Errorf("Run error %v, want the x509 error and %s", err, EnvCABundle)
	}
}

// Through the gateway's credential listener the error names the model
// host from the path, and the entry that would allow it.
func TestModelErrorThroughCredentialListener(t *testing.T) {
	u, _ := url.Parse("http://egress-gateway:3129/models.lan:8000/v1/chat/completions")
	rec := httptest.NewRecorder()
	gatewayRefusal(403, "port 8000 is not allowed for models.lan")(rec, httptest.NewRequest("POST", "/", nil))
	got := newModelError(u, rec.Result()).Error()
	want := `the egress gateway refused the model host models.lan:8000 (403): port 8000 is not allowed for models.lan; to allow it, add "models.lan:8000" to allowed_domains in the spec`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	u, _ = url.Parse("http://egress-gateway:3129/api.openai.com/v1/chat/completions")
	rec = httptest.NewRecorder()
	openAIError(401, "", `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}`)(rec, httptest.NewRequest("POST", "/", nil))
	if got := newModelError(u, rec.Result()).Error(); !strings.HasPrefix(got, "model API at api.openai.com answered 401") {
		t.Errorf("got %s, want the model host named", got)
	}
}
