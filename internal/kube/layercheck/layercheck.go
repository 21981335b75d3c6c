// Package layercheck is what the Kubernetes backend's isolation-layer pods
// (kube.CheckLayers) and the host share: the hidden command those pods run
// and the line its dial prints. The pod side is the role binary
// (internal/roles), which imports no Kubernetes client: this package
// imports nothing but the standard library.
package layercheck

// Command is the layer pods' command: "listen" accepts and closes
// connections until SIGTERM, "dial" makes one TCP connection and prints a
// [DialResult].
const Command = "kube-layer"

// DialResult is what `mcpsidecar kube-layer dial` prints, one JSON line.
type DialResult struct {
	Address   string `json:"address"`
	Connected bool   `json:"connected"`
	Error     string `json:"error,omitempty"`
}
