//go:build kube && docker

package e2e

// `mcpsidecar run --backend kubernetes` on the test cluster
// (scripts/kube-test-cluster.sh), the offline agent as in agent_test.go:
// the model and Microsoft Learn are fixtures, one pod of the fixture image
// in a namespace of the test's own, and the run's gateway pod resolves
// their names to that pod's address from its /etc/hosts
// (--kube-gateway-host); it has no other resolver, the cluster has no DNS.
// Nothing leaves the machine: the fixture pod is on the cluster's own
// bridge, which has no way off it (the script's SAFETY notes).
//
//	sudo scripts/kube-test-cluster.sh up
//	KUBECONFIG=/var/lib/mcpsidecar-kube/kubeconfig MCPSIDECAR_ALLOW_OLD_ENGINE=1 \
//	  go test -count=1 -tags docker,kube -run TestKubeRun ./e2e/

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/mcpsidecar/mcpsidecar/internal/kube"
)

// krSetup is what the runs of one test share: a binary of its own (the
// image trusts this test's CA), the fixture pod's address, the key.
type krSetup struct {
	id, dir, bin, ca, key, fixtureIP string
}

// krPrepare builds the binary, the CA and the fixture image, imports the
// image into the node's containerd, and starts the fixture pod playing
// behaviour. Everything is removed at the end of the test.
func krPrepare(t *testing.T, behaviour string) krSetup {
	t.Helper()
	NeedDocker(t)
	kbClient(t) // fails early, with the hint, without a cluster
	s := krSetup{id: RandHex(6), dir: t.TempDir(), key: "sk-e2e-" + RandHex(16)}
	s.bin = agBinary(t, s.id, s.dir)
	s.ca = agCerts(t, s.dir)
	image := agFixtureImage(t, s.id, s.dir)
	t.Cleanup(func() { agRemoveRunImages(s.dir) })
	krImport(t, image)
	s.fixtureIP = krFixturePod(t, s.id, image, s.key, behaviour)
	return s
}

// krImport brings a Docker image into the test cluster's containerd.
func krImport(t *testing.T, image string) {
	t.Helper()
	sock := filepath.Join(kbState(), "containerd", "containerd.sock")
	cmd := exec.Command("bash", "-o", "pipefail", "-c", `docker save "$1" | ctr -a "$2" -n k8s.io images import -`, "import", image, sock)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("importing %s into the node's containerd: %v\n%s", image, err, out)
	}
	t.Cleanup(func() {
		ref := image
		if !strings.Contains(strings.Split(ref, "/")[0], ".") {
			ref = "docker.io/library/" + ref
		}
		exec.Command("ctr", "-a", sock, "-n", "k8s.io", "images", "rm", ref).Run()
	})
}

// krFixturePod starts one pod with the fake model (port 80) and the fake
// Learn server (443, TLS with the test CA) as two containers, waits until
// both are ready, and returns its address. The pod is hardened like the
// Docker fixtures: non-root, read-only, no capability; binding 80 and 443
// as non-root takes the namespaced sysctl the Docker fixtures set too.
func krFixturePod(t *testing.T, id, image, key, behaviour string) string {
	t.Helper()
	cs := kgcClientset(t)
	ctx := context.Background()
	ns := "mcpsidecar-e2e-fixtures-" + id
	labels := map[string]string{"mcpsidecar.test": "1", "mcpsidecar.e2e.kube": id}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	uid := int64(65532)
	sc := &corev1.SecurityContext{
		RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: ptrTo(true), ReadOnlyRootFilesystem: ptrTo(true),
		AllowPrivilegeEscalation: ptrTo(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	container := func(name string, port int32, args ...string) corev1.Container {
		return corev1.Container{
			Name: name, Image: image, Args: args, ImagePullPolicy: corev1.PullNever, SecurityContext: sc,
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}},
				PeriodSeconds: 1},
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "fixtures", Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: ptrTo(false), EnableServiceLinks: ptrTo(false),
			SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}}},
			Containers: []corev1.Container{
				container("model", 80, "model", "--listen", ":80", "--key", key, "--behaviour", behaviour),
				container("learn", 443, "learn", "--listen", ":443", "--path", "/api/mcp", "--tls-cert", "/certs/learn.pem", "--tls-key", "/certs/learn-key.pem"),
			},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ip string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			return false, fmt.Errorf("fixture pod ended: %s", p.Status.Phase)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ip = p.Status.PodIP
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("fixture pod not ready: %v", err)
	}
	return ip
}

func ptrTo[T any](v T) *T { return &v }

// krRun is one `mcpsidecar run --backend kubernetes`.
type krRun struct {
	runsDir        string
	cmd            *exec.Cmd
	stdout         *strings.Builder
	stderr         *kbBuffer
	err            error
	wall           time.Duration
	namespaceLabel string
}

// command prepares a run: the spec allows the two fixture names and the
// cluster's pod subnet (where the fixture pod's address is), and the
// gateway resolves both names to the fixture pod.
func (s krSetup) command(t *testing.T, label string, extra ...string) *krRun {
	t.Helper()
	r := &krRun{runsDir: filepath.Join(s.dir, "runs-"+label), namespaceLabel: s.id + "-" + label}
	specFile := filepath.Join(s.dir, "sandbox_spec.toml")
	agWrite(t, specFile, `schema_version = 1
capabilities = ["network", "mcp_client", "openai_agents"]
allowed_domains = ["`+agModelHost+`", "`+agLearnHost+`"]
# The fixture pod's address is on the test cluster's pod subnet.
allowed_ip_addresses = ["10.237.0.0/24"]
`)
	cmd, _, errb := kbCommand(t, "run", r.namespaceLabel, r.runsDir)
	cmd.Path = s.bin
	cmd.Args[0] = s.bin
	cmd.Args = append(cmd.Args, "--spec", specFile, "--timeout", "3m",
		"--kube-gateway-host", agModelHost+"="+s.fixtureIP, "--kube-gateway-host", agLearnHost+"="+s.fixtureIP)
	cmd.Args = append(cmd.Args, extra...)
	cmd.Env = append(cmd.Env,
		"OPENAI_API_KEY="+s.key,
		"OPENAI_BASE_URL=http://"+agModelHost+"/v1",
		"MCPSIDECAR_CA_BUNDLE="+s.ca,
	)
	r.cmd, r.stderr = cmd, errb
	r.stdout = &strings.Builder{}
	cmd.Stdout = r.stdout
	return r
}

func (r *krRun) run(t *testing.T) {
	start := time.Now()
	r.err = r.cmd.Run()
	r.wall = time.Since(start)
	t.Logf("%s took %s; stderr:\n%s", strings.Join(r.cmd.Args, " "), r.wall.Round(time.Millisecond), r.stderr)
}

// krCheckRecord holds a Kubernetes run's record to the Docker run's
// checks: the answer printed and saved, the audited tool calls, every
// gateway decision allowed and joined to its turn or call, the timeline
// linking the search to its upstream request, a verdict with every check
// passed, no key in any file, and no namespace left.
func krCheckRecord(t *testing.T, c *kube.Client, s krSetup, r *krRun) {
	t.Helper()
	if r.err != nil {
		agDumpRun(t, r.runsDir)
		t.Fatalf("mcpsidecar run --backend kubernetes: %v\nstdout:\n%s", r.err, r.stdout)
	}
	runDir, meta := kbRunDir(t, r.runsDir)
	agCheckAnswer(t, runDir, r.stdout.String())
	search := agCheckAudit(t, runDir)
	agCheckDecisions(t, runDir, search)
	checkTimelineLinksSearch(t, runDir, agLearnHost)
	agCheckNoSecret(t, runDir, s.key)
	if meta.Command != "run" || meta.ExitCode != 0 || !meta.Verdict.OK {
		t.Errorf("run-metadata: command %q exit %d verdict ok %v; checks %+v", meta.Command, meta.ExitCode, meta.Verdict.OK, meta.Verdict.Checks)
	}
	for _, ch := range meta.Verdict.Checks {
		if !ch.OK {
			t.Errorf("verdict check %q failed: %s", ch.Name, ch.Detail)
		}
	}
	if len(meta.ArtifactProblems) > 0 {
		t.Errorf("artifact problems: %v", meta.ArtifactProblems)
	}
	for _, ct := range meta.Containers {
		if ct.ExitCode == nil || *ct.ExitCode != 0 {
			t.Errorf("role %s exit code %v, want 0", ct.Role, ct.ExitCode)
		}
	}
	for _, name := range []string{"answer.txt", "egress-decisions.jsonl", "mcp-sidecar-tool-calls.jsonl", "timeline.jsonl", "report.html",
		"gateway-harden-report.json", "sidecar-harden-report.json", "agent-harden-report.json"} {
		if p := agFind(t, runDir, name); p == "" {
			t.Errorf("%s missing", name)
		}
	}
	kbNoNamespace(t, c, r.namespaceLabel)
}

// TestKubeRun: the offline agent's task on the cluster leaves the record a
// Docker run leaves.
//
// Before it starts, the run deletes the namespace a dead run of this host
// left, and leaves a live run's alone (as a Docker run removes dead runs'
// containers first).
func TestKubeRun(t *testing.T) {
	c := kbClient(t)
	s := krPrepare(t, "task")
	cs := kgcClientset(t)
	host, dead := mustHostname(t), kgcDeadPID(t)
	t.Cleanup(func() { kgcCleanup(t, cs, s.id) })
	kgcNamespace(t, cs, s.id, "dead", host, dead)
	kgcNamespace(t, cs, s.id, "live", host, os.Getpid())
	r := s.command(t, "task")
	r.run(t)
	krCheckRecord(t, c, s, r)
	if !strings.Contains(r.stderr.String(), "gc: deleting ") {
		t.Error("the run did not say it deleted a dead run's namespace")
	}
	for name, wantGone := range map[string]bool{"dead": true, "live": false} {
		ns, err := cs.CoreV1().Namespaces().Get(context.Background(), "mcpsidecar-e2egc-"+s.id+"-"+name, metav1.GetOptions{})
		gone := err != nil || ns.DeletionTimestamp != nil
		if gone != wantGone {
			t.Errorf("namespace of the %s run: deleted or being deleted %v, want %v (err %v)", name, gone, wantGone, err)
		}
	}
}

// TestKubeRunInterrupted: SIGINT while the agent works (a model that
// repeats its search until the agent's loop guard stops it, the longest
// of the fake model's plays) ends the run with 130 and leaves no
// namespace.
func TestKubeRunInterrupted(t *testing.T) {
	c := kbClient(t)
	s := krPrepare(t, "loop")
	r := s.command(t, "sigint")
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	podsDone := regexp.MustCompile(`\[pods\s*\]\s+[0-9.]+ ms\s+ok`)
	for !podsDone.MatchString(r.stderr.String()) {
		if time.Now().After(deadline) {
			r.cmd.Process.Kill()
			t.Fatalf("the run never reached its wait phase:\n%s", r.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The agent pod was created with the pods phase: it is working now.
	r.cmd.Process.Signal(syscall.SIGINT)
	err := r.cmd.Wait()
	t.Logf("stderr:\n%s", r.stderr)
	if code := exitCode(t, err); code != 130 {
		t.Errorf("exit code %d after SIGINT, want 130", code)
	}
	_, m := kbRunDir(t, r.runsDir)
	if m.ExitCode != 130 {
		t.Errorf("run-metadata.json exit code %d, want 130", m.ExitCode)
	}
	kbNoNamespace(t, c, r.namespaceLabel)
}

// TestKubeRunConcurrent: ten runs at once on the one node all succeed,
// each with its full record, and leave no namespace; the total time is
// logged (docs/PERFORMANCE.md).
func TestKubeRunConcurrent(t *testing.T) {
	c := kbClient(t)
	s := krPrepare(t, "task")
	const n = 10
	runs := make([]*krRun, n)
	for i := range runs {
		runs[i] = s.command(t, fmt.Sprintf("c%d", i))
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.err = r.cmd.Run()
			r.wall = time.Since(start)
		}()
	}
	wg.Wait()
	total := time.Since(start)
	walls := make([]time.Duration, n)
	for i, r := range runs {
		walls[i] = r.wall.Round(time.Millisecond)
		t.Run(fmt.Sprintf("run%d", i), func(t *testing.T) {
			if r.err != nil {
				t.Logf("stderr:\n%s", r.stderr)
			}
			krCheckRecord(t, c, s, r)
		})
	}
	sort.Slice(walls, func(i, j int) bool { return walls[i] < walls[j] })
	t.Logf("%d concurrent runs on the cluster: total %s; each ended after %v", n, total.Round(time.Millisecond), walls)
}
