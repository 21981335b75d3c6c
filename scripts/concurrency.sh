#!/usr/bin/env bash
# Start N `mcpsidecar doctor` runs at once on one engine and report how many
# failed (with their exit codes and first error line), what they left
# behind (containers and networks carrying this measurement's label) and the
# total wall time. Issue 19's concurrency figures come from it.
#
# Usage: scripts/concurrency.sh BIN N [extra doctor flags...]
#   e.g. scripts/concurrency.sh bin/mcpsidecar 32 --ready-timeout 5m
# One warm-up run builds the image first, so the N runs do not race on the
# build. Every run has its own runs directory under a temporary directory,
# and every resource carries mcpsidecar.test=1 and mcpsidecar.bench=<id>;
# leftovers are counted, then removed. Runs only on loopback and the runs'
# own Docker networks (doctor sends nothing off the machine).
set -euo pipefail

bin="$(realpath "${1:?usage: $0 BIN N [doctor flags...]}")"
n="${2:?usage: $0 BIN N [doctor flags...]}"
shift 2
id="$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
label="mcpsidecar.bench=$id"
export MCPSIDECAR_LABELS="mcpsidecar.test=1,$label"
tmp="$(mktemp -d)"

cleanup() {
  local cs ns
  cs="$(docker ps -aq --filter "label=$label")"
  ns="$(docker network ls -q --filter "label=$label")"
  [[ -z "$cs" ]] || docker rm -f $cs >/dev/null
  [[ -z "$ns" ]] || docker network rm $ns >/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

"$bin" doctor --allow-old-engine --quiet --runs-dir "$tmp/warm" "$@" >/dev/null 2>"$tmp/warm.err" || {
  echo "warm-up doctor failed:" >&2; cat "$tmp/warm.err" >&2; exit 1; }

start=$(date +%s.%N)
for i in $(seq 1 "$n"); do
  ( rc=0; "$bin" doctor --allow-old-engine --quiet --runs-dir "$tmp/runs-$i" "$@" >"$tmp/$i.out" 2>"$tmp/$i.err" || rc=$?
    echo "$rc" >"$tmp/$i.rc" ) &
done
wait
end=$(date +%s.%N)

failures=0
for i in $(seq 1 "$n"); do
  rc="$(cat "$tmp/$i.rc")"
  if [[ "$rc" != 0 ]]; then
    failures=$((failures + 1))
    echo "run $i: exit $rc: $(grep -m1 -i 'error' "$tmp/$i.err" || tail -n1 "$tmp/$i.err")"
  fi
done
# A run can exit 0 with a failed teardown (recorded in run-metadata.json):
# list those, since they explain leftovers.
for m in "$tmp"/runs-*/run-*/run-metadata.json; do
  [[ -e "$m" ]] || continue
  jq -r --arg m "$m" '.phases[] | select(.ok == false) | "\($m): phase \(.name) failed: \(.error)"' "$m"
done
slowest=$(cat "$tmp"/runs-*/run-*/run-metadata.json 2>/dev/null |
  jq -s '[.[].phases[] | select(.name == "teardown") | .duration_ms] | max // 0 | . / 1000')
containers=$(docker ps -aq --filter "label=$label" | wc -l)
networks=$(docker network ls -q --filter "label=$label" | wc -l)
printf 'concurrency %d: failures %d, leftovers %d containers %d networks, wall %.1f s, slowest teardown %.1f s\n' \
  "$n" "$failures" "$containers" "$networks" "$(echo "$end - $start" | bc)" "$slowest"
