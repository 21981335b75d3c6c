package netpolicy

// EnvPolicy names the variable the gateway role reads its [Config] from,
// as JSON, when it is given no policy file; the host (internal/spec) sets
// it in the gateway's container.
const EnvPolicy = "MCPSIDECAR_GATEWAY_POLICY"

// EnvRunID names the variable that holds the run's id, which the gateway
// role writes into every decision line; the host sets it in every role's
// container (internal/orchestrate).
const EnvRunID = "MCPSIDECAR_RUN_ID"
