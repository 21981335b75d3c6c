//go:build linux

package harden

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
)

// envRlimitsChild makes the test binary a child that sets limits
// ("apply") or prints the limits it inherited ("report"), so the test
// process itself keeps its own.
const envRlimitsChild = "HARDEN_TEST_RLIMITS_CHILD"

// preHard is the nofile hard limit the child has before ApplyRlimits,
// below the one asked for: it must stay.
const preHard = 100

type rlimitsChildOutput struct {
	Layer      LayerStatus          `json:"layer"`
	Error      string               `json:"error,omitempty"`
	Limits     map[string][2]uint64 `json:"limits"`
	WriteError string               `json:"write_error"`
	Inherited  map[string][2]uint64 `json:"inherited"`
}

func currentLimits() map[string][2]uint64 {
	out := map[string][2]uint64{}
	for name, res := range rlimitResources {
		var l syscall.Rlimit
		if err := syscall.Getrlimit(res, &l); err == nil {
			out[name] = [2]uint64{l.Cur, l.Max}
		}
	}
	return out
}

func rlimitsChild(mode string) int {
	if mode == "report" {
		return encodeExit(currentLimits())
	}
	var out rlimitsChildOutput
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: preHard, Max: preHard}); err != nil {
		out.Error = err.Error()
		return encodeExit(out)
	}
	ls, err := RlimitsFromEnv(os.Getenv)
	if err == nil {
		out.Layer, err = ApplyRlimits(ls)
	}
	if err != nil {
		out.Error = err.Error()
		return encodeExit(out)
	}
	out.Limits = currentLimits()
	signal.Ignore(syscall.SIGXFSZ) // as Apply does: EFBIG instead of death
	f, err := os.CreateTemp("", "rlimit-*")
	if err == nil {
		_, err = f.Write(make([]byte, out.Limits["fsize"][0]+1))
		f.Close()
		os.Remove(f.Name())
	}
	if err != nil {
		out.WriteError = err.Error()
		if errors.Is(err, syscall.EFBIG) {
			out.WriteError = "EFBIG"
		}
	}
	self, _ := os.Executable()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envRlimitsChild+"=report")
	if b, err := cmd.Output(); err != nil {
		out.Error = "starting a child: " + err.Error()
	} else if err := json.Unmarshal(b, &out.Inherited); err != nil {
		out.Error = "decoding the child's limits: " + err.Error()
	}
	return encodeExit(out)
}

func encodeExit(v any) int {
	if err := json.NewEncoder(os.Stdout).Encode(v); err != nil {
		return 3
	}
	return 0
}

// TestApplyRlimits sets limits in a child process: they are in force, a
// write past fsize fails with EFBIG, a hard limit already lower stays,
// and a process the child starts inherits them (the launcher's workload).
func TestApplyRlimits(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envRlimitsChild+"=apply", EnvRlimits+"=fsize=65536:65536,nofile=128:128")
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	var out rlimitsChildOutput
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
	if out.Error != "" {
		t.Fatal(out.Error)
	}
	// Soft equal to hard, as the plan's: a Go program started with a
	// lower soft nofile raises it to its hard limit (the child here is
	// one).
	want := map[string][2]uint64{"fsize": {65536, 65536}, "nofile": {preHard, preHard}}
	for name, w := range want {
		if out.Limits[name] != w {
			t.Errorf("%s in force %v, want %v", name, out.Limits[name], w)
		}
		if out.Inherited[name] != w {
			t.Errorf("%s inherited by a child %v, want %v", name, out.Inherited[name], w)
		}
	}
	if out.WriteError != "EFBIG" {
		t.Errorf("a write past fsize: %q, want EFBIG", out.WriteError)
	}
	l := out.Layer
	if l.Name != LayerRlimits || !l.Enforced || !l.Required || l.Detail != "set by the role (no ulimits from the engine): fsize=65536:65536, nofile=100:100" {
		t.Errorf("layer %+v", l)
	}
}
