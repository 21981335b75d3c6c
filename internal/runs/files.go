package runs

// The files of a run directory: one home for every name, so the host that
// writes or collects a file and every reader of it (timeline, report,
// runs show, the roles that write into their output directory) spell it
// the same. The contract test in internal/contract fails when a name is
// spelled as a literal anywhere else.
const (
	// Written by the host before anything starts (internal/sandbox).
	FileSandboxSpec     = "sandbox-spec.json"
	FileResolvedProfile = "resolved-profile.json"
	FileLandlockPolicy  = "landlock-policy.json"
	FileSeccompProfile  = "seccomp-profile.json"
	FileSquidConf       = "squid.conf"
	FileDockerfile      = "Dockerfile"
	FileGatewayPolicy   = "gateway-policy.json"
	FileProbeConfig     = "config.json" // the probe's context (internal/probe)
	FileLedger          = "softening-ledger.json"

	// The workload's streams, captured by the host.
	FileStdout = "stdout.txt"
	FileStderr = "stderr.txt"

	// Written by a role into its output directory and collected under
	// the same name.
	FileAnswer         = "answer.txt"                   // agent
	FileAgentTurns     = "agent-turns.jsonl"            // agent
	FileProbeReport    = "report.json"                  // probe
	FileProbeStatus    = "status.ndjson"                // probe
	FileProbeDone      = "done.json"                    // probe
	FileDecisions      = "egress-decisions.jsonl"       // gateway
	FileEgressCounts   = "egress-counts.json"           // gateway, at exit: requests accepted and lines written
	FileAgentTelemetry = "agent-telemetry.jsonl"        // gateway: the agent's OTLP it relayed (agent_telemetry)
	FileAudit          = "mcp-sidecar-tool-calls.jsonl" // sidecar
	FileHardenReport   = "harden-report.json"           // every role; collected as <role>-harden-report.json
	FileSquidAccessLog = "access.log"                   // the Squid gateway; converted into FileDecisions

	// Written by the host when it collects.
	FileGatewayLogs     = "gateway-logs.json"
	FileSidecarLogs     = "mcp-sidecar-logs.json"
	FileSidecarStdout   = "mcp-sidecar-stdout.txt"
	FileSidecarStderr   = "mcp-sidecar-stderr.txt"
	FileSidecarMetadata = "mcp-sidecar-metadata.json"
	FileKubeLayers      = "kube-layers.json" // test-sandbox on Kubernetes: which network layers hold there

	// Derived from the others (internal/timeline).
	FileTimeline = "timeline.jsonl"
	FileReport   = "report.html"
)

// StartResultsFile is the record of a service role's start:
// gateway-start-results.json, mcp-sidecar-start-results.json.
func StartResultsFile(role string) string {
	if role == "sidecar" {
		return "mcp-sidecar-start-results.json"
	}
	return role + "-start-results.json"
}

// CollectedHardenReport is the name a role's FileHardenReport is collected
// under in the run directory.
func CollectedHardenReport(role string) string { return role + "-" + FileHardenReport }

// RoleFiles are the files each role writes into its output directory that
// the host copies into the run directory under the same name (the harden
// report is copied as CollectedHardenReport).
var RoleFiles = map[string][]string{
	"gateway": {FileDecisions, FileEgressCounts, FileAgentTelemetry},
	"sidecar": {FileAudit},
	"agent":   {FileAnswer, FileAgentTurns, FileProbeReport, FileProbeStatus, FileProbeDone},
}
