//go:build linux

package sidecar

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An upstream whose certificate the sandbox does not trust is reported
// with the setting that fixes it (issue 13 item 7).
func TestUpstreamUnknownAuthorityNamesCABundle(t *testing.T) {
	up := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(up.Close)
	audit, err := OpenAuditLog(filepath.Join(t.TempDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := New(Config{UpstreamURL: up.URL + "/mcp", Audit: audit, UpstreamTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sc.CheckUpstream(context.Background())
	if err == nil || !strings.Contains(err.Error(), "unknown authority") || !strings.Contains(err.Error(), envCABundle) {
		t.Errorf("CheckUpstream error %v, want the x509 error and %s", err, envCABundle)
	}
}
