#!/bin/sh
# Reproduces e2e/redteam-kube/README.md on the shared test cluster, as root.
# Usage: sudo e2e/redteam-kube/run.sh probe|pad|fill|flood
# It builds a private copy of HEAD with src/x_redteam.go.in added to
# internal/cli (the repository itself is not changed), then runs that
# binary's `run --backend kubernetes` with the agent container's command
# replaced by `x-redteam MODE`: the attack code hardens itself as the
# agent does and runs as the workload, uid 65532, in the agent pod.
set -eu
mode=${1:?probe, pad, fill or flood}
spec=
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=${RT_WORK:-/tmp/rt-kube}
S=/var/lib/mcpsidecar-kube
mkdir -p "$work/src" "$work/runs"
# The committed tree (HEAD), not the working tree other people are editing.
(cd "$repo" && git archive HEAD) | tar -x -C "$work/src" --exclude='e2e/*'
# .go.in: not a Go file of this module (it is package cli, for the copy).
cp "$here/src/x_redteam.go.in" "$work/src/internal/cli/x_redteam.go"
(cd "$work/src" && CGO_ENABLED=0 go build -tags testcommands -o "$work/mcpsidecar-rt" ./cmd/mcpsidecar)
case $mode in
probe) cmd=x-redteam,probe ;;
# The hidden request, then 40000 denied requests with long host names:
# about 32 MB of decision lines, over the 16 MiB read cap.
pad) cmd=x-redteam,pad,http://10.237.0.1:16250/pods,40000 ;;
# 100000 denied requests (about 80 MB of decision lines, past the
# gateway's 64 MiB fsize), then an allowed request to the fixture that
# README.md's finding 1 starts on 10.237.0.1:18777.
fill) cmd=x-redteam,fill,-,100000,http://10.237.0.1:18777/secret-after-fill
	spec="--spec $here/spec.toml" ;;
# 12 MiB on stdout, past the kubelet's default log rotation size.
flood) cmd=x-redteam,flood spec="--spec $here/spec.toml" ;;
*) echo "mode: probe, pad, fill or flood" >&2; exit 2 ;;
esac
export KUBECONFIG=$S/kubeconfig OPENAI_API_KEY=sk-redteam-dummy
"$work/mcpsidecar-rt" run --backend kubernetes $spec --allow-old-engine --runs-dir "$work/runs" \
	--kube-image-import containerd:$S/containerd/containerd.sock --kube-node-root $S/kubelet \
	--kube-pod-addresses --timeout 4m --x-workload-cmd "$cmd" || echo "exit $?"
