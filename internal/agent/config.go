package agent

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/net/http/httpproxy"

	"github.com/mcpsidecar/mcpsidecar/internal/agent/agentenv"
)

// Defaults for [Options] left at their zero value.
const (
	// DefaultModel is cheap, fast and reliable at function calling through
	// Chat Completions, which is all this workload needs.
	DefaultModel = "gpt-4.1-mini"
	// DefaultBaseURL is OpenAI's own API.
	DefaultBaseURL = "https://api.openai.com/v1"
	// DefaultSidecarURL is where the harness puts the sidecar.
	DefaultSidecarURL = "http://mcp-sidecar:8000/mcp"
	// DefaultOutputDir is the container's only writable mount.
	DefaultOutputDir = "/sandbox-output"
	// DefaultQuestion is the seed's task.
	DefaultQuestion = "How should an instance of HttpClient be obtained when using C# and .NET 8?"

	DefaultMaxTurns       = 12
	DefaultRequestTimeout = 90 * time.Second
	DefaultMaxRetries     = 3
	DefaultMaxAnswerBytes = 64 << 10
)

// Environment variable names read by [LoadConfig].
const (
	EnvInSandbox  = agentenv.InSandbox
	EnvSidecarURL = agentenv.SidecarURL
	EnvAPIKey     = agentenv.APIKey
	EnvBaseURL    = agentenv.BaseURL
	EnvModel      = agentenv.Model
	EnvQuestion   = agentenv.Question
	// EnvEngineVersion is the Docker Engine's version, from the harness;
	// only the connectivity check reads it.
	EnvEngineVersion = "MCPSIDECAR_ENGINE_VERSION"
)

// Options are the command-line settings; zero values fall back to the
// environment and then to the defaults above.
type Options struct {
	Model          string
	Question       string
	MaxTurns       int
	RequestTimeout time.Duration
	OutputDir      string // for tests; the container always uses DefaultOutputDir
}

// Config is everything [Run] and [Check] need, resolved once.
type Config struct {
	SidecarURL     string
	BaseURL        string
	APIKey         string
	Model          string
	Question       string
	OutputDir      string
	MaxTurns       int
	RequestTimeout time.Duration
	MaxRetries     int
	// RetryBase is the first back-off delay; each retry doubles it.
	RetryBase      time.Duration
	MaxAnswerBytes int
	// EngineVersion is the Docker Engine's version, when the harness says.
	EngineVersion string
	// Proxy picks the proxy for a request URL (nil: no proxy). It is built
	// from the environment once, explicitly, because the standard library's
	// http.ProxyFromEnvironment is frozen before main runs (libraries.md §1.5).
	Proxy func(*url.URL) (*url.URL, error)
}

// SeedTask reports whether the question is the seed's task, whose steps
// (read the format, search code samples, then save) the agent enforces and
// the verdict checks. Any other question is the user's own.
func (c Config) SeedTask() bool {
	return c.Question == DefaultQuestion
}

// LoadConfig resolves opts against the environment read through getenv.
func LoadConfig(opts Options, getenv func(string) string) (Config, error) {
	c := Config{
		SidecarURL:     firstOf(getenv(EnvSidecarURL), DefaultSidecarURL),
		BaseURL:        firstOf(getenv(EnvBaseURL), DefaultBaseURL),
		APIKey:         getenv(EnvAPIKey),
		Model:          firstOf(opts.Model, getenv(EnvModel), DefaultModel),
		Question:       firstOf(opts.Question, getenv(EnvQuestion), DefaultQuestion),
		OutputDir:      firstOf(opts.OutputDir, DefaultOutputDir),
		MaxTurns:       opts.MaxTurns,
		RequestTimeout: opts.RequestTimeout,
		MaxRetries:     DefaultMaxRetries,
		RetryBase:      time.Second,
		MaxAnswerBytes: DefaultMaxAnswerBytes,
		Proxy:          proxyFromEnv(getenv),
		EngineVersion:  getenv(EnvEngineVersion),
	}
	if c.MaxTurns == 0 {
		c.MaxTurns = DefaultMaxTurns
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	return c, c.validate()
}

// validate reports every problem in c at once.
func (c Config) validate() error {
	var errs []error
	for _, u := range []struct{ name, val string }{{EnvSidecarURL, c.SidecarURL}, {EnvBaseURL, c.BaseURL}} {
		if err := checkHTTPURL(u.val); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u.name, err))
		}
	}
	if c.MaxTurns < 1 || c.MaxTurns > 100 {
		errs = append(errs, fmt.Errorf("max turns %d: must be between 1 and 100", c.MaxTurns))
	}
	if c.RequestTimeout < time.Second {
		errs = append(errs, fmt.Errorf("request timeout %s: must be at least 1s", c.RequestTimeout))
	}
	if strings.TrimSpace(c.Question) == "" {
		errs = append(errs, errors.New("question is empty"))
	}
	return errors.Join(errs...)
}

// checkHTTPURL accepts only absolute http(s) URLs with a host.
func checkHTTPURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parsing %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http or https URL", raw)
	}
	return nil
}

// proxyFromEnv builds the proxy function from the proxy variables, upper
// case first as the gateway's contract sets them.
func proxyFromEnv(getenv func(string) string) func(*url.URL) (*url.URL, error) {
	cfg := httpproxy.Config{
		HTTPProxy:  firstOf(getenv("HTTP_PROXY"), getenv("http_proxy")),
		HTTPSProxy: firstOf(getenv("HTTPS_PROXY"), getenv("https_proxy")),
		NoProxy:    firstOf(getenv("NO_PROXY"), getenv("no_proxy")),
	}
	return cfg.ProxyFunc()
}

// CheckSandbox refuses to run outside the sandbox container: the marker
// variable must be "1" and outputDir a writable directory. It is a routing
// check (host or container), not a security boundary.
func CheckSandbox(getenv func(string) string, outputDir string) error {
	const hint = "mcpsidecar agent runs only inside the sandbox container; on the host use: mcpsidecar run"
	if getenv(EnvInSandbox) != "1" {
		return fmt.Errorf("%s is not 1: %s", EnvInSandbox, hint)
	}
	fi, err := os.Stat(outputDir)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("output directory %s is missing: %s", outputDir, hint)
	}
	f, err := os.CreateTemp(outputDir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("output directory %s is not writable: %w", outputDir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(filepath.Clean(name))
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
