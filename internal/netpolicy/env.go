package netpolicy

// EnvPolicy names the variable the gateway role reads its [Config] from,
// as JSON, when it is given no policy file; the host (internal/spec) sets
// it in the gateway's container.
const EnvPolicy = "MCPSIDECAR_GATEWAY_POLICY"
