//go:build docker

package e2e

// Progress while the agent works (issue 18 item 5): `mcpsidecar run`
// against the offline fixtures (the fake model and the fake Learn server,
// agent_test.go) prints one line per model turn and per tool call on
// stderr as they happen, says what egress each caused, streams the events
// with --events, and prints none under --quiet. The test reports the
// figure: how long after `run` starts the first model turn's line
// appears, cold (the first run builds the image) and warm.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/timeline"
)

// stampedLine is one stderr line and when the test read it.
type stampedLine struct {
	at   time.Duration // since the command started
	text string
}

type progressResult struct {
	err     error
	lines   []stampedLine
	stdout  string
	runsDir string
	wall    time.Duration
}

// progressRun runs `mcpsidecar run` with the fixtures playing behaviour,
// reading stderr as it comes.
func progressRun(t *testing.T, s agSetup, behaviour string, extra ...string) progressResult {
	t.Helper()
	id := RandHex(6)
	r := progressResult{runsDir: filepath.Join(s.dir, "runs-"+id)}
	fx := agStartFixtures(t, id, s.image, s.key, behaviour)
	w := agWatch(t, id, fx)
	specFile := filepath.Join(s.dir, "sandbox_spec.toml")
	agWrite(t, specFile, `schema_version = 1
capabilities = ["network", "mcp_client", "openai_agents"]
allowed_domains = ["`+agModelHost+`", "`+agLearnHost+`"]
allowed_ip_addresses = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append([]string{"run", "--spec", specFile, "--runs-dir", r.runsDir, "--allow-old-engine", "--timeout", "3m"}, extra...)
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Env = append(os.Environ(),
		"OPENAI_API_KEY="+s.key,
		"OPENAI_BASE_URL=http://"+agModelHost+"/v1",
		"MCPSIDECAR_CA_BUNDLE="+s.ca,
		"MCPSIDECAR_LABELS=mcpsidecar.test=1,mcpsidecar.e2e="+id,
	)
	cmd.Env = append(cmd.Env, s.env...)
	t.Cleanup(func() { agRemoveLeftovers(id, fx) })
	var stdout strings.Builder
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(errPipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			mu.Lock()
			r.lines = append(r.lines, stampedLine{at: time.Since(start), text: sc.Text()})
			mu.Unlock()
		}
		io.Copy(io.Discard, errPipe)
	}()
	<-done
	r.err = cmd.Wait()
	r.wall = time.Since(start)
	r.stdout = stdout.String()
	w.stop()
	return r
}

func (r progressResult) stderr() string {
	var b strings.Builder
	for _, l := range r.lines {
		fmt.Fprintf(&b, "%8.3fs  %s\n", l.at.Seconds(), l.text)
	}
	return b.String()
}

// first returns the first line starting with prefix.
func (r progressResult) first(prefix string) (stampedLine, bool) {
	for _, l := range r.lines {
		if strings.HasPrefix(l.text, prefix) {
			return l, true
		}
	}
	return stampedLine{}, false
}

func TestRunProgressLines(t *testing.T) {
	NeedDocker(t)
	s := agPrepare(t)
	var figures []string

	// volume: the output in engine volumes (docs/engine-only.md), whose
	// logs reach the run directory by the harness's copy every second.
	for _, pass := range []string{"cold", "warm"} {
		t.Run(pass, func(t *testing.T) {
			events := filepath.Join(s.dir, "events-"+pass+".jsonl")
			ps := s
			if pass == "volume" {
				ps.env = []string{"MCPSIDECAR_OUTPUT=volume"}
			}
			r := progressRun(t, ps, "task", "--events", events)
			if r.err != nil {
				t.Fatalf("mcpsidecar run: %v\nstderr:\n%s", r.err, r.stderr())
			}
			t.Logf("stderr:\n%s", r.stderr())
			turn1, ok := r.first("[model    ]")
			if !ok || !strings.Contains(turn1.text, "turn 1") || !strings.Contains(turn1.text, "egress: 1 allowed") {
				t.Fatalf("no progress line for the first model turn with its egress (got %q)", turn1.text)
			}
			search, ok := r.first("[tool     ]")
			if !ok || !strings.Contains(r.stderr(), "microsoft_code_sample_search ok") {
				t.Errorf("no progress line for the code-sample search (first tool line %q)", search.text)
			}
			if !strings.Contains(r.stderr(), "egress: 1 allowed") {
				t.Error("no line says which egress it caused")
			}
			// The line came while the run went, from the live watcher: before
			// the collect phase (the record is read after it), and before the
			// wait phase ended when the agent ran long enough for the watcher's
			// polling (100 ms) and its wait for the gateway's lines (150 ms) to
			// fit in; a sub-second agent on a quiet machine is flushed as the
			// wait phase ends.
			wait, okW := r.first("[wait     ]")
			collect, okC := r.first("[collect  ]")
			agent, okA := r.first("[agent    ]")
			if !okW || !okC || !okA || turn1.at > collect.at {
				t.Errorf("the first turn's line (%s) came after the collect phase's (%v, %v)", turn1.at, collect.at, okC)
			} else if wait.at-agent.at > time.Second && turn1.at > wait.at {
				t.Errorf("the first turn's line (%s) came after the wait phase's (%v), which lasted %v", turn1.at, wait.at, wait.at-agent.at)
			}
			if n := strings.Count(r.stderr(), "older than"); n != 1 {
				t.Errorf("the old-engine warning printed %d times, want once", n)
			}
			if w, ok := r.first("warning: Docker Engine"); ok && len(w.text) > 200 {
				t.Errorf("the old-engine warning is %d characters long: %q", len(w.text), w.text)
			}
			checkEventStream(t, events)
			figures = append(figures, fmt.Sprintf("FIGURES progress %s: first model turn line %.0f ms after run started (%s); run wall %.0f ms",
				pass, float64(turn1.at.Microseconds())/1000, strings.TrimSpace(turn1.text), float64(r.wall.Microseconds())/1000))
			if out := os.Getenv("MCPSIDECAR_KEEP_RUN"); out != "" && pass == "warm" {
				runDir := agOnlyRunDir(t, r.runsDir)
				os.RemoveAll(out)
				if err := os.CopyFS(out, os.DirFS(runDir)); err != nil {
					t.Errorf("copying the run to %s: %v", out, err)
				}
			}
		})
	}

	t.Run("quiet", func(t *testing.T) {
		r := progressRun(t, s, "task", "--quiet")
		if r.err != nil {
			t.Fatalf("mcpsidecar run --quiet: %v\nstderr:\n%s", r.err, r.stderr())
		}
		for _, prefix := range []string{"[model", "[tool", "[egress", "[agent"} {
			if l, ok := r.first(prefix); ok {
				t.Errorf("--quiet printed a progress line: %q", l.text)
			}
		}
	})
	t.Log("\n" + strings.Join(figures, "\n"))
}

// checkEventStream: the --events file holds the run's events as timeline
// lines, numbered in order, from the first phase to the teardown, with the
// model turns, the tool calls and the gateway's decisions among them.
func checkEventStream(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("--events file: %v", err)
	}
	kinds := map[string]int{}
	var phases []string
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e timeline.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("--events line %d: %v", i+1, err)
		}
		if e.Schema != timeline.Schema || e.Seq != i+1 {
			t.Fatalf("--events line %d: schema %q seq %d", i+1, e.Schema, e.Seq)
		}
		kinds[e.Kind]++
		if e.Kind == timeline.KindPhase {
			phases = append(phases, e.Name)
		}
	}
	for _, k := range []string{timeline.KindPhase, timeline.KindModelRequest, timeline.KindToolCall, timeline.KindEgress, timeline.KindAnswerSaved} {
		if kinds[k] == 0 {
			t.Errorf("--events has no %s event (kinds %v)", k, kinds)
		}
	}
	if len(phases) == 0 || phases[0] != "spec" || phases[len(phases)-1] != "teardown" {
		t.Errorf("--events phases %v, want spec first and teardown last", phases)
	}
}
