//go:build linux

package harden_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpsidecar/mcpsidecar/internal/harden"
	"github.com/mcpsidecar/mcpsidecar/internal/spec"
	"github.com/moby/profiles/seccomp"
)

// TestSpecSeccompProfile checks the profile the spec compiler hands Docker:
// nothing the roles need is refused, nothing on the deny list is allowed.
func TestSpecSeccompProfile(t *testing.T) {
	profile, err := spec.SeccompProfile()
	if err != nil {
		t.Fatal(err)
	}
	if err := harden.CheckDockerProfile(profile, spec.DeniedSyscalls()); err != nil {
		t.Error(err)
	}
}

// TestCheckDockerProfileFindsProblems proves the check can fail: Docker's
// own default allows ptrace and personality (both on the deny list), and
// a profile that drops a needed syscall or allows by default is caught.
func TestCheckDockerProfileFindsProblems(t *testing.T) {
	dockerDefault, err := json.Marshal(seccomp.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	withoutEpoll := strings.ReplaceAll(string(dockerDefault), `"epoll_pwait",`, "")
	tests := []struct {
		name     string
		profile  string
		wantSubs []string
	}{
		{"docker default allows ptrace", string(dockerDefault), []string{"deny list: ptrace, personality"}},
		{"needed syscall refused", withoutEpoll, []string{"roles need: epoll_pwait"}},
		{"allow by default", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[]}`, []string{"default action SCMP_ACT_ALLOW", "roles need: mmap"}},
		{"not a profile", `{"defaultAction":`, []string{"loading seccomp profile"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := harden.CheckDockerProfile([]byte(tt.profile), []string{"ptrace", "personality", "mount"})
			if err == nil {
				t.Fatal("check passed")
			}
			for _, sub := range tt.wantSubs {
				if !strings.Contains(err.Error(), sub) {
					t.Errorf("error %q lacks %q", err, sub)
				}
			}
		})
	}
}
