package fakemodel

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestServeHTTPRefusals(t *testing.T) {
	s, err := New(Task, "k")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, path, auth, body string
		want                           int
	}{
		{"wrong path", "POST", "/v1/embeddings", "Bearer k", "{}", 404},
		{"GET", "GET", "/v1/chat/completions", "Bearer k", "", 404},
		{"no key", "POST", "/v1/chat/completions", "", "{}", 401},
		{"wrong key", "POST", "/v1/chat/completions", "Bearer x", "{}", 401},
		{"bad JSON", "POST", "/v1/chat/completions", "Bearer k", "{", 400},
		{"ok", "POST", "/v1/chat/completions", "Bearer k", `{"model":"m","messages":[{"role":"user","content":"q"}]}`, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			r.Header.Set("Authorization", tt.auth)
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Errorf("status %d, want %d (body %s)", w.Code, tt.want, w.Body)
			}
			if tt.want == http.StatusOK && !strings.Contains(w.Body.String(), `"name":"read_answer_format"`) {
				t.Errorf("first reply %s, want a read_answer_format call", w.Body)
			}
		})
	}
	if _, err := New("chatty", ""); err == nil {
		t.Error("New accepted an unknown behaviour")
	}
}
