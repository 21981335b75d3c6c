package launcher

// EnvReportDir names the variable that says where the launcher writes its
// harden-report.json (the workload's output directory); the host
// (internal/sandbox) sets it in the workload's container.
const EnvReportDir = "MCPSIDECAR_LAUNCH_REPORT_DIR"
