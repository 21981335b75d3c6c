package kube

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// stopCluster is a fake cluster holding one running service pod, "svc",
// whose kubelet ends the main container with code when the pod's
// activeDeadlineSeconds is set (Client.Stop), and an exec that records
// each command and runs do.
func stopCluster(t *testing.T, killCode int32, do func(c *Client, argv []string) error) (*Client, *[]string) {
	t.Helper()
	cs := fake.NewClientset(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			{Name: HolderContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		}},
	})
	c := &Client{cs: cs, poll: time.Millisecond}
	var log []string
	cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		log = append(log, "patch "+string(a.(k8stesting.PatchAction).GetPatch()))
		go func() { ended(t, c, "svc", killCode) }()
		return false, nil, nil
	})
	c.exec = func(ctx context.Context, ns, pod, container string, argv []string, stdout, stderr io.Writer) error {
		log = append(log, "exec "+pod+"/"+container+" "+strings.Join(argv, " "))
		return do(c, argv)
	}
	return c, &log
}

// ended marks the pod's main container as exited with code, as the
// kubelet reports it.
func ended(t *testing.T, c *Client, pod string, code int32) {
	ctx := context.Background()
	p, err := c.cs.CoreV1().Pods("ns").Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}
	if _, err := c.cs.CoreV1().Pods("ns").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Error(err)
	}
}

// TestStopMain: the service is stopped by our stop command in its main
// container, and its exit code read from the pod's status; the pod is
// never stopped as a whole (its holder keeps the volume). A role that
// outlives the grace is stopped with its pod, after BeforeKill ran, and
// reported killed. A container already ended is not signalled.
func TestStopMain(t *testing.T) {
	stopCmd := "exec svc/main " + strings.Join(StopArgs(), " ")
	tests := []struct {
		name    string
		do      func(c *Client, argv []string) error
		pre     bool // the container ended before the stop
		want    StopResult
		wantLog []string
	}{
		{name: "signal", do: func(c *Client, _ []string) error { ended(t, c, "svc", 0); return nil },
			want: StopResult{ExitCode: 0}, wantLog: []string{stopCmd}},
		{name: "exec cut off by the exit", do: func(c *Client, _ []string) error {
			ended(t, c, "svc", 0)
			return errors.New("stream closed")
		}, want: StopResult{ExitCode: 0}, wantLog: []string{stopCmd}},
		{name: "ignored", do: func(*Client, []string) error { return nil },
			want: StopResult{ExitCode: 137, Killed: true}, wantLog: []string{stopCmd, "before kill", `patch {"spec":{"activeDeadlineSeconds":1}}`}},
		{name: "already ended", pre: true, do: func(*Client, []string) error { t.Error("exec in an ended container"); return nil },
			want: StopResult{ExitCode: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, log := stopCluster(t, 137, tt.do)
			if tt.pre {
				ended(t, c, "svc", 3)
			}
			got, err := c.StopMain(context.Background(), "ns", "svc", StopOptions{Grace: 200 * time.Millisecond,
				BeforeKill: func(context.Context) { *log = append(*log, "before kill") }})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("StopMain = %+v, want %+v", got, tt.want)
			}
			if !slices.Equal(*log, tt.wantLog) {
				t.Errorf("calls %q, want %q", *log, tt.wantLog)
			}
		})
	}
}

// TestExecError: a command that fails is an error naming it, its pod and
// container, with the end of its stderr; stderr still reaches the
// caller's writer.
func TestExecError(t *testing.T) {
	c := &Client{exec: func(_ context.Context, _, _, _ string, _ []string, _, stderr io.Writer) error {
		io.WriteString(stderr, strings.Repeat("x", 10000)+"mcpsidecar: the reason\n")
		return errors.New("command terminated with exit code 2")
	}}
	var errb bytes.Buffer
	err := c.Exec(context.Background(), "ns", "gateway", HolderContainer, ReadArgs("/out", 5, []string{"a"}), nil, &errb)
	if err == nil || !strings.Contains(err.Error(), "exec /mcpsidecar kube-read-output in ns/gateway/holder: command terminated with exit code 2: x") ||
		!strings.HasSuffix(err.Error(), "mcpsidecar: the reason") || len(err.Error()) > tailMax+200 {
		t.Errorf("error %.300q...", err)
	}
	if errb.Len() != 10023 {
		t.Errorf("caller's stderr got %d bytes, want all 10023", errb.Len())
	}
}

// TestReadOutputLines: the read command's problem lines are problems,
// anything else it says is a note.
func TestReadOutputLines(t *testing.T) {
	var argv []string
	c := &Client{exec: func(_ context.Context, _, pod, container string, a []string, stdout, stderr io.Writer) error {
		argv = a
		io.WriteString(stdout, "TAR")
		io.WriteString(stderr, ReadProblem+"x.jsonl: a symbolic link: not read\nmcpsidecar kube-read-output: hardening degraded: y\n\n")
		return nil
	}}
	var out bytes.Buffer
	problems, notes, err := c.ReadOutput(context.Background(), "ns", "sidecar", "/sandbox-output", []string{"x.jsonl", "h.json"}, 99, &out)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/mcpsidecar", "kube-read-output", "--dir", "/sandbox-output", "--max", "99", "--", "x.jsonl", "h.json"}; !slices.Equal(argv, want) {
		t.Errorf("argv %q, want %q", argv, want)
	}
	if out.String() != "TAR" || !slices.Equal(problems, []string{"x.jsonl: a symbolic link: not read"}) ||
		!slices.Equal(notes, []string{"mcpsidecar kube-read-output: hardening degraded: y"}) {
		t.Errorf("out %q problems %q notes %q", out.String(), problems, notes)
	}
}

// TestExecURL: the exec asks for the command in the named container,
// stdout and stderr, and neither stdin nor a terminal.
func TestExecURL(t *testing.T) {
	c, err := NewClient(&rest.Config{Host: "https://127.0.0.1:9"}) // never dialled
	if err != nil {
		t.Fatal(err)
	}
	u := c.execURL("ns", "gateway", HolderContainer, []string{"/mcpsidecar", "kube-read-output", "--", "a b"})
	if u.Path != "/api/v1/namespaces/ns/pods/gateway/exec" {
		t.Errorf("path %s", u.Path)
	}
	q := u.Query()
	if !slices.Equal(q["command"], []string{"/mcpsidecar", "kube-read-output", "--", "a b"}) || q.Get("container") != HolderContainer ||
		q.Get("stdout") != "true" || q.Get("stderr") != "true" || q.Has("stdin") || q.Has("tty") {
		t.Errorf("query %v", q)
	}
}

// TestWaitDoneTimeout: the wait's own timeout is reported as a deadline
// (the run's timeout, TimedOut in the record), even when the call that
// saw it was the client's rate limiter, whose error does not wrap it;
// another error stays what it is.
func TestWaitDoneTimeout(t *testing.T) {
	c, _ := stopCluster(t, 137, nil)
	start := time.Now()
	c.cs.(*fake.Clientset).PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if time.Since(start) > 50*time.Millisecond {
			time.Sleep(60 * time.Millisecond) // past the deadline
			return true, nil, errors.New("client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline")
		}
		return false, nil, nil
	})
	_, err := c.WaitDone(context.Background(), "ns", "svc", 100*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitDone = %v, want a deadline", err)
	}
	c, _ = stopCluster(t, 137, nil)
	c.cs.(*fake.Clientset).PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	if _, err := c.WaitDone(context.Background(), "ns", "svc", time.Second); err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("WaitDone = %v, want the API's error", err)
	}
}
