package spec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWorkloadTable(t *testing.T) {
	tests := []struct {
		name string
		toml string
		want *Workload
	}{
		{"absent", "schema_version = 1\n", nil},
		{"image only", "schema_version = 1\n[workload]\nimage = \"python:3.12-slim\"\n",
			&Workload{Image: "python:3.12-slim"}},
		{"image and command", "schema_version = 1\ncapabilities = [\"network\"]\n[workload]\nimage = \"registry.test:5000/team/agent:v1\"\ncommand = [\"python3\", \"/app/agent.py\", \"--once\"]\n",
			&Workload{Image: "registry.test:5000/team/agent:v1", Command: []string{"python3", "/app/agent.py", "--once"}}},
		{"digest", "schema_version = 1\n[workload]\nimage = \"agent@sha256:" + strings.Repeat("ab", 32) + "\"\ncommand = [\"/agent\"]\n",
			&Workload{Image: "agent@sha256:" + strings.Repeat("ab", 32), Command: []string{"/agent"}}},
		{"image id", "schema_version = 1\n[workload]\nimage = \"sha256:" + strings.Repeat("0f", 32) + "\"\n",
			&Workload{Image: "sha256:" + strings.Repeat("0f", 32)}},
		{"before other tables", "schema_version = 1\ncapabilities = [\"network\"]\n[workload]\nimage = \"a\"\n[[environment_variables]]\nname = \"X\"\nvalue = \"1\"\n",
			&Workload{Image: "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Load("w.toml", []byte(tt.toml))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, s.Workload); diff != "" {
				t.Errorf("workload (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWorkloadKeysAfterTable: a key after [workload] belongs to it, so a
// top-level key written there is an unknown workload key, not silently
// moved.
func TestWorkloadKeysAfterTable(t *testing.T) {
	_, err := Load("w.toml", []byte("schema_version = 1\n[workload]\nimage = \"a\"\ncapabilities = [\"network\"]\n"))
	want := `w.toml:4:1: workload.capabilities: unknown key; supported keys: command, image`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestCheckImageRef(t *testing.T) {
	for _, ok := range []string{"a", "python:3.12-slim", "ghcr.io/org/agent:1.0", "localhost:5000/x/y_z:tag", "mcpsidecar-debian-python:0123456789ab", "a__b/c--d.e"} {
		if err := CheckImageRef(ok); err != nil {
			t.Errorf("CheckImageRef(%q) = %v, want ok", ok, err)
		}
	}
	for _, bad := range []string{"", "Python", "a b", "a:", "a:-x", "-a", "a/", "/a", "a@sha256:12", "a\n", "a;rm", strings.Repeat("a", 256), "sha256:"} {
		if err := CheckImageRef(bad); err == nil {
			t.Errorf("CheckImageRef(%q) = nil, want an error", bad)
		}
	}
}

func TestCheckCommand(t *testing.T) {
	for _, ok := range [][]string{{"python3"}, {"/usr/bin/python3", "-c", "print(1)"}, {"agent", ""}} {
		if err := CheckCommand(ok); err != nil {
			t.Errorf("CheckCommand(%q) = %v, want ok", ok, err)
		}
	}
	for _, bad := range [][]string{nil, {""}, {"bin/x"}, {"./x"}, {"../x"}, {"x", "a\x00"}, make([]string, maxCommandArgs+1), {"x", strings.Repeat("a", maxArgBytes+1)}} {
		if err := CheckCommand(bad); err == nil {
			t.Errorf("CheckCommand(%q) = nil, want an error", bad)
		}
	}
}
