#!/usr/bin/env bash
# doctor's wall time, interleaved in one run (this machine is noisy):
# each named binary, and each named mode, once per round.
#   scripts/bench-doctor.sh ROUNDS NAME=BINARY[:ENV=VALUE] ...
# e.g. scripts/bench-doctor.sh 10 before=/tmp/old after=bin/mcpsidecar \
#        after-volume=bin/mcpsidecar:MCPSIDECAR_OUTPUT=volume
# Prints each sample, then the median per name. Root, a local engine.
set -euo pipefail
rounds=$1; shift
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT
declare -A samples
for ((i = 1; i <= rounds; i++)); do
  for arg in "$@"; do
    name=${arg%%=*}; rest=${arg#*=}; bin=${rest%%:*}; env=()
    [[ $rest == *:* ]] && env=("${rest#*:}")
    start=$(date +%s.%N)
    env "${env[@]}" "$bin" doctor --allow-old-engine --quiet --runs-dir "$runs/$name" >"$runs/out" 2>&1 || {
      echo "$name: doctor failed; its last lines:" >&2; tail -n 15 "$runs/out" >&2; exit 1; }
    t=$(echo "$(date +%s.%N) - $start" | bc)
    echo "$name round $i: $t s"
    samples[$name]+="$t "
  done
done
for name in "${!samples[@]}"; do
  echo "$name median: $(echo "${samples[$name]}" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}') s"
done
