package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const ownPlaceholder = "mcpsidecar-placeholder-0123456789abcdef0123456789abcdef0123456789abcdef"

// fakeListener answers like the gateway's credential listener: refuses a
// request without the placeholder (401) or with another value (403),
// naming the placeholder; accept makes it answer 200 to everything (a
// broken gateway), noValue refuses as the gateway does for a credential
// whose host variable is empty.
func fakeListener(t *testing.T, accept, noValue bool) (*httptest.Server, *[]string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization"))
		mu.Unlock()
		auth := r.Header.Values("Authorization")
		switch {
		case accept:
			w.Write([]byte(`{"choices":[]}`))
		case noValue:
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte("mcpsidecar egress gateway: denied: the credential for api.openai.com has no value (OPENAI_API_KEY is not set on the host)\n"))
		case len(auth) == 0:
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte("mcpsidecar egress gateway: denied: missing Authorization: the credential listener needs the run's placeholder\n"))
		case len(auth) != 1 || auth[0] != "Bearer "+ownPlaceholder:
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte("mcpsidecar egress gateway: denied: Authorization does not carry the run's placeholder\n"))
		default:
			w.Write([]byte(`{"choices":[]}`))
		}
	}))
	t.Cleanup(s.Close)
	return s, &seen
}

func TestPlaceholderRefused(t *testing.T) {
	tests := []struct {
		name            string
		accept, noValue bool
		wantOK          bool
		inDetail        []string
	}{
		{"gateway refuses both", false, false, true, []string{"no Authorization: refused 401", "a wrong placeholder: refused 403", "does not carry the run's placeholder"}},
		{"gateway accepts", true, false, false, []string{"no Authorization: answered 200", "a wrong placeholder: answered 200"}},
		// A refusal for another reason proves nothing about the placeholder.
		{"refused only for a missing value", false, true, false, []string{"answered 403, want 401 or 403 naming the placeholder"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, seen := fakeListener(t, tt.accept, tt.noValue)
			// A proxy in the environment must not be used: the listener is reached directly.
			t.Setenv("HTTP_PROXY", "http://proxy.invalid:1")
			cfg := Config{BaseURL: s.URL + "/api.openai.com/v1", APIKey: ownPlaceholder, RequestTimeout: 5 * time.Second}
			c := placeholderRefused(context.Background(), cfg)
			if c.OK != tt.wantOK {
				t.Errorf("ok = %v, want %v: %s", c.OK, tt.wantOK, c.Detail)
			}
			for _, want := range tt.inDetail {
				if !strings.Contains(c.Detail, want) {
					t.Errorf("detail %q, want %q", c.Detail, want)
				}
			}
			if len(*seen) != 2 {
				t.Fatalf("listener saw %v, want two requests", *seen)
			}
			for _, line := range *seen {
				if !strings.HasPrefix(line, "POST /api.openai.com/v1/chat/completions ") || strings.Contains(line, ownPlaceholder) {
					t.Errorf("request %q: want a POST to the model path, never with the run's placeholder", line)
				}
			}
		})
	}
}

func TestCheckPlaceholderRequiredWithoutListener(t *testing.T) {
	for _, base := range []string{DefaultBaseURL, "http://models.lan:8000/v1", "https://egress-gateway:3129/api.openai.com/v1"} {
		c := checkPlaceholderRequired(context.Background(), Config{BaseURL: base})
		if !c.OK || !strings.Contains(c.Detail, "no credential listener") {
			t.Errorf("%s: %+v, want ok with nothing sent", base, c)
		}
	}
	if !credentialListener("http://egress-gateway:3129/api.openai.com/v1") {
		t.Error("the credential listener's URL is not recognised")
	}
}
