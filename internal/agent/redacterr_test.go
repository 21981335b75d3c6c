package agent

import (
	"errors"
	"testing"
)

func TestRedactErr(t *testing.T) {
	tests := []struct{ name, text, key, want string }{
		{"long key anywhere", "401: bad key sk-live-123456x", "sk-live-123456", "401: bad key [redacted]x"},
		{"short key as a token", "401: bad key k1 (auth)", "k1", "401: bad key [redacted] (auth)"},
		{"short key inside words kept", "model ak1b not found", "k1", "model ak1b not found"},
		{"no key", "boom", "", "boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := redactErr(errors.New(tt.text), tt.key).Error(); got != tt.want {
				t.Errorf("redactErr(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}
