package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/spec"
)

// CheckPlaceholderRequired is the name of the connectivity check's row
// that proves the gateway holds the model credential: a model request
// without the run's placeholder, and one with a wrong placeholder, must
// both be refused.
const CheckPlaceholderRequired = "gateway refuses model request without placeholder"

// checkPlaceholderRequired sends two model requests to the credential
// listener, one without the credential's header and one with a wrong
// placeholder of the right shape, and passes only when the gateway
// refuses both, saying the placeholder is what is missing. Threat: a
// listener that adds the real key to any request would give it to
// anything on the internal network. The run's own placeholder is never
// sent: a correct gateway forwards nothing, and one that wrongly accepted
// would forward a harmless request (an unknown model) to the model host,
// fail this check and record the decision in its log. Without a
// credential listener (the key is not held by the gateway) there is
// nothing to check.
func checkPlaceholderRequired(ctx context.Context, cfg Config) Check {
	if !credentialListener(cfg.BaseURL) {
		return Check{Name: CheckPlaceholderRequired, OK: true,
			Detail: fmt.Sprintf("no credential listener (%s is %s): the gateway holds no model credential", EnvBaseURL, cfg.BaseURL)}
	}
	return placeholderRefused(ctx, cfg)
}

// credentialListener reports whether base is the gateway's credential
// listener (http://egress-gateway:3129/HOST/...).
func credentialListener(base string) bool {
	u, err := url.Parse(base)
	return err == nil && u.Scheme == "http" && u.Host == net.JoinHostPort(spec.GatewayAlias, strconv.Itoa(spec.CredentialPort))
}

// placeholderRefused sends the two requests to cfg.BaseURL.
func placeholderRefused(ctx context.Context, cfg Config) Check {
	c := Check{Name: CheckPlaceholderRequired}
	u, _ := url.Parse(cfg.BaseURL)
	wrong := wrongPlaceholder(cfg.APIKey)
	var details []string
	c.OK = true
	for _, try := range []struct{ name, auth string }{{"no Authorization", ""}, {"a wrong placeholder", "Bearer " + wrong}} {
		status, reason, err := postModel(ctx, cfg, try.auth)
		switch {
		case err != nil:
			c.OK = false
			details = append(details, try.name+": "+err.Error())
		case (status == http.StatusUnauthorized || status == http.StatusForbidden) && strings.Contains(reason, "placeholder"):
			details = append(details, fmt.Sprintf("%s: refused %d (%s)", try.name, status, reason))
		default:
			c.OK = false
			details = append(details, fmt.Sprintf("%s: answered %d, want 401 or 403 naming the placeholder (%s)", try.name, status, reason))
		}
	}
	c.Detail = u.Host + ": " + strings.Join(details, "; ")
	return c
}

// wrongPlaceholder is a placeholder-shaped value that is not the run's.
func wrongPlaceholder(own string) string {
	for {
		b := make([]byte, 24)
		rand.Read(b)
		if w := "mcpsidecar-placeholder-" + hex.EncodeToString(b); w != own {
			return w
		}
	}
}

// postModel posts a minimal chat request to the base URL, directly (never
// through a proxy: the listener is on the internal network), and returns
// the status and the first line of the gateway's reason.
func postModel(ctx context.Context, cfg Config, auth string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, min(cfg.RequestTimeout, 20*time.Second))
	defer cancel()
	body := `{"model":"mcpsidecar-doctor","messages":[{"role":"user","content":"doctor"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(cfg.BaseURL, "/")+"/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent(newTraceID()))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	reason := firstLine(strings.TrimSpace(string(data)))
	reason = strings.TrimPrefix(reason, "mcpsidecar egress gateway: ")
	return resp.StatusCode, reason, nil
}
