package inside

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestAwaitReady(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	}))
	defer ok.Close()
	port := ok.Listener.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := AwaitReady(ctx, port, "/healthz", false); err != nil {
		t.Errorf("a server answering 200: %v", err)
	}
	if err := AwaitReady(ctx, port, "/", true); err != nil {
		t.Errorf("a TCP listener: %v", err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if err := AwaitReady(short, port, "/other", false); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a server answering 404: %v, want not ready with the status", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := l.Addr().(*net.TCPAddr).Port
	l.Close()
	short3, cancel3 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel3()
	if err := AwaitReady(short3, free, "/", true); err == nil || !strings.Contains(err.Error(), strconv.Itoa(free)) {
		t.Errorf("nothing listening: %v, want not ready naming the port", err)
	}
}
