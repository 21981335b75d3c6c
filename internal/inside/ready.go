package inside

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Ready is the line the await-ready helper prints on stdout once the role
// answered.
const Ready = "await-ready: ready"

// AwaitReady waits until something answers on this network namespace's
// loopback at port: a TCP connection accepted (tcp), or an HTTP GET of
// path answered 200. Run in a helper container that joins only a role's
// network namespace (--network container:<id>), it is the role's
// readiness as the host would judge it from inside that namespace, with
// no packet on any network of the run. It returns ctx's error, with the
// last failure, when ctx ends first.
func AwaitReady(ctx context.Context, port int, path string, tcp bool) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	check := func(ctx context.Context) error { return GetOK(ctx, client, "http://"+addr+path) }
	if tcp {
		check = func(ctx context.Context) error {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return err
			}
			return c.Close()
		}
	}
	pause := 5 * time.Millisecond
	for {
		last := check(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not answering: %w (last: %v)", addr, ctx.Err(), last)
		case <-time.After(pause):
			pause = min(2*pause, 50*time.Millisecond)
		}
	}
}

// GetOK is one readiness request: a GET of url through client that must
// be answered 200 (the host's own check from inside a namespace, and a
// helper's, are the same request).
func GetOK(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(res.Body, 4096))
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return nil
}
