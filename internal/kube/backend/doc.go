// Package kubebackend is the Kubernetes backend of the lifecycle
// (sandbox.Backend): the plan's containers as pods of a cluster, one
// namespace per run (docs/kubernetes.md). It maps the plan through
// internal/kube (objects, client), reads each role's record through the
// API (the holder's reader, internal/holder), and records through the
// sandbox.Job it is given. Docker still builds our image: the backend
// imports it into the node's containerd, or pushes it to a registry and
// names it by digest. cli chooses it (--backend kubernetes); the
// lifecycle never names it.
package kubebackend
