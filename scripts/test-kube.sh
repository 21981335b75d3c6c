#!/usr/bin/env bash
# test-kube.sh: the Kubernetes backend's tests against the real test cluster
# (scripts/kube-test-cluster.sh; docs/kubernetes.md). `make test` runs it last.
#
# It builds the cluster's binaries when the cache lacks them (the first time
# on a machine: 10 to 30 minutes), brings the cluster up unless one is
# already up (then it is used and left up), runs the `kube`-tag tests of
# internal/kube and the Kubernetes e2e tests (doctor, run, test-sandbox,
# SIGINT, ten concurrent runs, gc), and takes the cluster down again on
# every path when it brought it up. Needs root, Docker and what
# kube-test-cluster.sh needs. MCPSIDECAR_BIN names the binary the e2e tests
# run (make passes the test binary).
set -euo pipefail
cd "$(dirname "$0")/.."
cluster=scripts/kube-test-cluster.sh
state=${MCPSIDECAR_KUBE_STATE:-/var/lib/mcpsidecar-kube}
export KUBECONFIG=$state/kubeconfig
export MCPSIDECAR_ALLOW_OLD_ENGINE=1
# `build` builds kubectl into its cache when none is installed.
k8s_version=$(sed -n 's/^K8S_VERSION=//p' "$cluster")
export PATH=$PATH:${MCPSIDECAR_KUBE_CACHE:-/var/cache/mcpsidecar-kube}/bin/kubernetes-$k8s_version

"$cluster" build
if [[ -f $KUBECONFIG ]] && kubectl get nodes 2>/dev/null | grep -qw Ready; then
	echo "test-kube: using the test cluster that is already up"
else
	trap '"$cluster" down' EXIT
	"$cluster" up
fi

echo "== internal/kube against the cluster"
go test -count=1 -tags kube -timeout 20m ./internal/kube/...
echo "== e2e on the cluster"
go test -count=1 -tags docker,kube -timeout 40m -run '^TestKube' ./e2e/
