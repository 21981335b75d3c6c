package dockerx

import (
	"strings"
	"testing"
)

func TestSSHArgs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ssh://host", "-o ConnectTimeout=30 -T -- host docker system dial-stdio"},
		{"ssh://me@host:2222", "-o ConnectTimeout=30 -T -l me -p 2222 -- host docker system dial-stdio"},
		{"ssh://me@10.0.0.1/", "-o ConnectTimeout=30 -T -l me -- 10.0.0.1 docker system dial-stdio"},
	} {
		got, err := sshArgs(tc.in)
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("sshArgs(%q) = %q, %v; want %q", tc.in, strings.Join(got, " "), err, tc.want)
		}
	}
	for _, bad := range []string{"ssh://", "ssh://host/var/run/docker.sock", "ssh://me:pw@host", "ssh://-oProxyCommand=x", "ssh://-l@host", "ssh://host?x=1", "tcp://host"} {
		if _, err := sshArgs(bad); err == nil || !strings.Contains(err.Error(), "DOCKER_HOST") {
			t.Errorf("sshArgs(%q) = %v, want an error naming DOCKER_HOST", bad, err)
		}
	}
}
