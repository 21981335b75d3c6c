package contract

// runFileLiteralsLeft are the places (package, name) that still spell a
// run-directory file name instead of importing it from internal/runs.
// "config.json" and "Dockerfile" in internal/dockerx are the Docker CLI's
// config and the build context's file, not run files.
var runFileLiteralsLeft = []string{
	"internal/agent agent-turns.jsonl",
	"internal/agent answer.txt",
	"internal/cli report.json",
	"internal/dockerx Dockerfile",
	"internal/dockerx config.json",
	"internal/egress access.log",
	"internal/harden harden-report.json",
	"internal/probe done.json",
	"internal/probe egress-decisions.jsonl",
	"internal/probe mcp-sidecar-tool-calls.jsonl",
	"internal/probe report.json",
	"internal/probe run-metadata.json",
	"internal/probe status.ndjson",
	"internal/sidecar mcp-sidecar-tool-calls.jsonl",
	"internal/spec Dockerfile",
	"internal/spec gateway-policy.json",
	"internal/spec landlock-policy.json",
	"internal/spec resolved-profile.json",
	"internal/spec sandbox-spec.json",
	"internal/spec seccomp-profile.json",
	"internal/spec softening-ledger.json",
	"internal/spec squid.conf",
	"internal/timeline agent-turns.jsonl",
	"internal/timeline answer.txt",
	"internal/timeline egress-decisions.jsonl",
	"internal/timeline gateway-policy.json",
	"internal/timeline mcp-sidecar-tool-calls.jsonl",
	"internal/timeline report.html",
	"internal/timeline report.json",
	"internal/timeline resolved-profile.json",
	"internal/timeline run-metadata.json",
	"internal/timeline stderr.txt",
	"internal/timeline stdout.txt",
	"internal/timeline timeline.jsonl",
	"scripts/gatewaybench access.log",
	"scripts/gatewaybench egress-decisions.jsonl",
	"scripts/gatewaybench gateway-policy.json",
	"scripts/gatewaybench squid.conf",
	"scripts/proxybench access.log",
	"scripts/proxybench egress-decisions.jsonl",
	"scripts/proxybench gateway-policy.json",
	"scripts/proxybench squid.conf",
}

// envLiteralsLeft are the places (package, name) that still spell a
// variable another package also spells: one of them should own it. None
// is left; a new one fails the test.
var envLiteralsLeft = []string{}
