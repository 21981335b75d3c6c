#!/usr/bin/env bash
# bench-kube-doctor.sh: doctor on the Docker backend and on the test cluster
# (scripts/kube-test-cluster.sh up), interleaved, after one warm run of each
# (the image built and imported), on this machine only. Prints one line per
# run with its wall time and the load average; take the medians.
#
#   scripts/bench-kube-doctor.sh [BIN] [ROUNDS]     # as root; defaults bin/mcpsidecar, 5
set -euo pipefail
bin=${1:-bin/mcpsidecar}
rounds=${2:-5}
state=${MCPSIDECAR_KUBE_STATE:-/var/lib/mcpsidecar-kube}
export KUBECONFIG=${KUBECONFIG:-$state/kubeconfig} MCPSIDECAR_ALLOW_OLD_ENGINE=1
[ -x "$bin" ] || { echo "bench-kube-doctor: no binary at $bin (make build)" >&2; exit 2; }
[ -r "$KUBECONFIG" ] || { echo "bench-kube-doctor: no kubeconfig at $KUBECONFIG (scripts/kube-test-cluster.sh up)" >&2; exit 2; }
work=$(mktemp -d /tmp/bench-kube-doctor.XXXXXX)
trap 'rm -rf "$work"' EXIT
kube=(--backend kubernetes --kube-image-import "containerd:$state/containerd/containerd.sock"
  --kube-node-root "$state/kubelet" --kube-pod-addresses)

timed() { # label, args...
  local label=$1; shift
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  "$bin" doctor --quiet --runs-dir "$work/runs-$label" "$@" >/dev/null 2>&1 || rc=$?
  t1=$(date +%s.%N)
  printf '%s rc=%d %.2f s load=%s\n' "$label" "$rc" "$(echo "$t1 - $t0" | bc)" "$(cut -d' ' -f1 /proc/loadavg)"
}

"$bin" doctor --quiet --runs-dir "$work/warm" >/dev/null 2>&1 || { echo "bench-kube-doctor: warm Docker doctor failed" >&2; exit 1; }
"$bin" doctor --quiet --runs-dir "$work/warm" "${kube[@]}" >/dev/null 2>&1 || { echo "bench-kube-doctor: warm Kubernetes doctor failed" >&2; exit 1; }
for _ in $(seq 1 "$rounds"); do
  timed docker
  timed kube "${kube[@]}"
done
