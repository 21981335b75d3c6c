// Package kube maps one run of the sandbox onto Kubernetes objects, and
// creates and removes them.
//
// The mapping ([Objects], [Namespace], [Services], [Policies], [Pods]) is
// pure: it reads the same orchestrate.Plan the Docker backend executes and
// the resolved profile it came from, and returns API objects, tested as
// golden YAML without a cluster. One run is one Namespace (in place of the
// two Docker networks), labelled with the run's mcpsidecar labels so gc can
// find it; gateway, sidecar and agent are three Pods, never containers of
// one pod (they would share a network namespace, and the agent could reach
// the gateway's route out); the sidecar's and the gateway's aliases are
// Services; NetworkPolicies deny by default and open exactly the plan's
// edges. The agent pod also carries its own rules (package netguard),
// installed by an init container, because many clusters do not enforce
// NetworkPolicies. docs/kubernetes.md ("The mapping") says what each
// Docker option becomes and what has no Kubernetes form.
//
// [Client] is the thin side: it creates a run's objects in order, waits
// for them, reads logs and deletes the namespace. Only it talks to a
// cluster; this package reads no flag and no environment variable (the
// caller passes the kubeconfig it chose).
package kube
