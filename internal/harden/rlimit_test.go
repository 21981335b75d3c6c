package harden

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRlimitsRoundTrip(t *testing.T) {
	in := []Rlimit{{Name: "fsize", Soft: 64 << 20, Hard: 64 << 20}, {Name: "nofile", Soft: 1024, Hard: 4096}}
	v, err := FormatRlimits(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := "fsize=67108864:67108864,nofile=1024:4096"; v != want {
		t.Errorf("FormatRlimits = %q, want %q", v, want)
	}
	got, err := RlimitsFromEnv(func(k string) string {
		if k == EnvRlimits {
			return v
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestRlimitsUnset(t *testing.T) {
	got, err := RlimitsFromEnv(func(string) string { return "" })
	if got != nil || err != nil {
		t.Errorf("got %v, %v; want none", got, err)
	}
}

// TestRlimitsRefused: a value a role cannot set is an error on both sides,
// never a limit silently left out.
func TestRlimitsRefused(t *testing.T) {
	for _, tt := range []struct{ value, want string }{
		{"nproc=512:512", `limit "nproc"`},
		{"core=0:0", `limit "core"`},
		{"fsize=2:1", "soft 2 is above hard 1"},
		{"fsize=1", "want NAME=SOFT:HARD"},
		{"fsize", "want NAME=SOFT:HARD"},
		{"fsize=-1:-1", "invalid syntax"},
		{"fsize=1:1,", "want NAME=SOFT:HARD"},
		{"fsize=unlimited:unlimited", "invalid syntax"},
	} {
		t.Run(tt.value, func(t *testing.T) {
			_, err := RlimitsFromEnv(func(string) string { return tt.value })
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), EnvRlimits) {
				t.Errorf("got %v, want an error naming %s and containing %q", err, EnvRlimits, tt.want)
			}
		})
	}
	if _, err := FormatRlimits([]Rlimit{{Name: "nproc", Soft: 1, Hard: 1}}); err == nil {
		t.Error("FormatRlimits accepted nproc")
	}
}

// TestRlimitsLowered: a limit is never raised above the hard limit in
// force (an unprivileged process could not; a lower one is stricter).
func TestRlimitsLowered(t *testing.T) {
	for _, tt := range []struct {
		want            Rlimit
		cur, soft, hard uint64
	}{
		{Rlimit{"nofile", 4096, 4096}, 1 << 20, 4096, 4096},
		{Rlimit{"nofile", 4096, 4096}, 1024, 1024, 1024},
		{Rlimit{"nofile", 512, 4096}, 1024, 512, 1024},
		{Rlimit{"fsize", 64, 64}, ^uint64(0), 64, 64},
	} {
		soft, hard := lowered(tt.want, tt.cur)
		if soft != tt.soft || hard != tt.hard {
			t.Errorf("lowered(%v, hard %d) = %d:%d, want %d:%d", tt.want, tt.cur, soft, hard, tt.soft, tt.hard)
		}
	}
}
