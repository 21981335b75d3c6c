package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// maxBackoff caps one wait, including a server's Retry-After.
const maxBackoff = 30 * time.Second

// retryTransport sends a model request and turns an error answer into a
// [modelError]. It retries what can change — 408, 429, a 5xx that is not
// the gateway's policy refusal, a connection reset — a bounded number of
// times with exponential back-off, honouring Retry-After; go-openai has no
// retries of its own. Anything else fails at once: retrying a 4xx or a
// refusal would only hide a misconfiguration.
type retryTransport struct {
	next    http.RoundTripper
	retries int
	base    time.Duration
	// timeout bounds each attempt, response body included.
	timeout time.Duration
	// notify, when set, hears about each retry (for the log on stderr).
	notify func(why string, attempt int, wait time.Duration)
}

func (t retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := t.attempt(req)
		if err == nil && resp.StatusCode < 400 {
			return resp, nil
		}
		why, retryAfter, err := t.failure(req, resp, err)
		var me *modelError
		canRetry := errors.As(err, &me) && me.retryable() || me == nil && connectionReset(err)
		if !canRetry || attempt >= t.retries || (req.Body != nil && req.GetBody == nil) {
			if me != nil {
				me.Retries = attempt
			}
			return nil, err
		}
		wait := t.backoff(attempt, retryAfter)
		if t.notify != nil {
			t.notify(why, attempt+1, wait)
		}
		if err := sleepCtx(req, wait); err != nil {
			return nil, err
		}
		if req, err = rewind(req); err != nil {
			return nil, err
		}
	}
}

// failure reads one failed attempt: what to say in a retry notice, the
// server's Retry-After, and the error it amounts to.
func (t retryTransport) failure(req *http.Request, resp *http.Response, err error) (string, string, error) {
	if err != nil {
		var me *modelError
		if errors.As(err, &me) {
			return fmt.Sprintf("answered %d", me.Status), me.RetryAfter, me
		}
		return "failed: " + err.Error(), "", err
	}
	defer resp.Body.Close()
	me := newModelError(req.URL, resp)
	why := fmt.Sprintf("answered %d", me.Status)
	if me.Code != "" {
		why += " (" + me.Code + ")"
	}
	return why, me.RetryAfter, me
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

// backoff is base·2^attempt, or the server's Retry-After if longer, capped.
func (t retryTransport) backoff(attempt int, retryAfter string) time.Duration {
	wait := t.base << attempt
	if d, ok := parseRetryAfter(retryAfter, time.Now()); ok && d > wait {
		wait = d
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
