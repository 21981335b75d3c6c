package agent

import (
	"context"
	"errors"
	"io"
)

// ServeConfig is what the agent role needs to start: the resolved
// [Config], whether to run the connectivity check instead of a model, and
// the streams it writes to (stdout carries exactly the answer).
type ServeConfig struct {
	Config
	Check          bool
	Stdout, Stderr io.Writer
}

// ErrMissingKey is returned by [Serve] when a model run has no API key.
var ErrMissingKey = errors.New(EnvAPIKey + " is not set")

// Serve runs the agent role in its security-critical order: the
// configuration is already read ([LoadConfig]), then harden is called, and
// only then is any connection made: the connectivity check with Check,
// else the model loop ([Run]). harden installs the in-process
// restrictions; the threat it answers is a workload that talks to the
// sidecar, the gateway or the model with the container's full rights. A
// harden error is returned as it is, and nothing is contacted.
func Serve(ctx context.Context, cfg ServeConfig, harden func() error) error {
	if harden == nil {
		return errors.New("agent: no harden hook")
	}
	if err := harden(); err != nil {
		return err
	}
	if cfg.Check {
		return RunConnectivityCheck(ctx, cfg.Config, cfg.Stdout)
	}
	if cfg.APIKey == "" {
		return ErrMissingKey
	}
	return Run(ctx, cfg.Config, cfg.Stdout, cfg.Stderr)
}
