//go:build linux

package roles

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpsidecar/mcpsidecar/internal/kube/layercheck"
)

// TestKubeLayerDial: one JSON line saying whether the connection opened,
// to a listener of `kube-layer listen` and to a port nothing listens on.
func TestKubeLayerDial(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- layerListen(ctx, port) }()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(5 * time.Second)
	for !layerDial(context.Background(), addr, time.Second).Connected {
		if time.Now().After(deadline) {
			t.Fatal("kube-layer listen never accepted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var out strings.Builder
	s := Streams{Out: &out, Err: &strings.Builder{}}
	// The flag after the argument, as the host writes the command line
	// (kube.CheckLayers).
	if err := kubeLayerCmd(context.Background(), []string{"dial", addr, "--timeout", "2s"}, s); err != nil {
		t.Fatal(err)
	}
	var r layercheck.DialResult
	if err := json.Unmarshal([]byte(out.String()), &r); err != nil || !r.Connected || r.Address != addr {
		t.Errorf("dial to the listener printed %q (%v)", out.String(), err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("listen after cancel: %v", err)
	}
	if r := layerDial(context.Background(), addr, time.Second); r.Connected || r.Error == "" {
		t.Errorf("dial with nothing listening = %+v, want not connected with the error", r)
	}
	for _, args := range [][]string{{"dial", "nohostport"}, {"dial", "h:99999"}, {"dial", "h:1", "--timeout", "0s"}, {"listen", "--port", "0"}} {
		if code := Run(context.Background(), append([]string{layercheck.Command}, args...), s); code != exitUsage {
			t.Errorf("kube-layer %v: exit %d, want %d", args, code, exitUsage)
		}
	}
}
