package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// maxBackoff caps one wait, including a server's Retry-After.
const maxBackoff = 30 * time.Second

// retryTransport retries a request that got 429 or a 5xx, a bounded number
// of times with exponential back-off; go-openai has no retries of its own.
// Other failures (4xx, transport errors) are returned at once: retrying them
// would only hide a misconfiguration.
type retryTransport struct {
	next    http.RoundTripper
	retries int
	base    time.Duration
	// timeout bounds each attempt, response body included.
	timeout time.Duration
	// notify, when set, hears about each retry (for the log on stderr).
	notify func(status int, attempt int, wait time.Duration)
}

func (t retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := t.attempt(req)
		if err != nil || !retryable(resp.StatusCode) || attempt >= t.retries {
			return resp, err
		}
		if req.Body != nil && req.GetBody == nil {
			return resp, nil // the body cannot be sent again
		}
		wait := t.backoff(attempt, resp.Header.Get("Retry-After"))
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if t.notify != nil {
			t.notify(resp.StatusCode, attempt+1, wait)
		}
		if err := sleepCtx(req, wait); err != nil {
			return nil, err
		}
		if req, err = rewind(req); err != nil {
			return nil, err
		}
	}
}

// attempt sends req once under the per-attempt timeout, which ends when
// the caller closes the response body.
func (t retryTransport) attempt(req *http.Request) (*http.Response, error) {
	if t.timeout <= 0 {
		return t.next.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelBody releases the attempt's context when the body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// retryable reports whether status is worth another attempt.
func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// backoff is base·2^attempt, or the server's Retry-After if longer, capped.
func (t retryTransport) backoff(attempt int, retryAfter string) time.Duration {
	wait := t.base << attempt
	if s, err := strconv.Atoi(retryAfter); err == nil && s >= 0 && time.Duration(s)*time.Second > wait {
		wait = time.Duration(s) * time.Second
	}
	return min(wait, maxBackoff)
}

// sleepCtx waits d or until the request's context ends.
func sleepCtx(req *http.Request, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-req.Context().Done():
		return fmt.Errorf("waiting to retry: %w", req.Context().Err())
	}
}

// rewind returns a copy of req with a fresh body.
func rewind(req *http.Request) (*http.Request, error) {
	if req.GetBody == nil {
		return req, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, fmt.Errorf("rewinding request body: %w", err)
	}
	r := req.Clone(req.Context())
	r.Body = body
	return r, nil
}
