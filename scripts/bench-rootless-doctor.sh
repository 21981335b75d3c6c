#!/usr/bin/env bash
# doctor's wall time on a rootless engine, as its user (issue 29):
#   scripts/bench-rootless-doctor.sh ROUNDS BINARY
# Root. Starts a rootless engine as mcpsidecar-rootless the way
# internal/testutil/rootlesshost does (the user, its sub-uids and
# /dev/net/tun's mode must be set up: run e2e/rootless_test.go once), runs
# one doctor to build the image, then ROUNDS doctors, and prints each, the
# median and the containers and volumes the engine created per run
# (docker events). Everything is removed at the end. BINARY must be
# readable and executable by that user (e.g. under /tmp).
set -euo pipefail
n=$1 bin=$2
u=mcpsidecar-rootless
uid=$(id -u $u)
rt=/run/user/$uid/bench-$$ dr=/home/$u/.local/share/docker-bench-$$ runs=/home/$u/bench-runs-$$
mkdir -p "$(dirname "$rt")" "$rt" "$dr"; chown $u: "$(dirname "$rt")" "$rt" "$dr"; chmod 700 "$rt"
mode=$(stat -c %a /dev/net/tun); chmod 666 /dev/net/tun
setsid runuser -u $u -- env -i HOME=/home/$u XDG_RUNTIME_DIR="$rt" PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  sh /usr/share/docker.io/contrib/dockerd-rootless.sh --data-root "$dr" >/tmp/bench-rootless-daemon.log 2>&1 &
daemon=$!
events=$(mktemp)
cleanup() { kill -TERM "$daemon" 2>/dev/null || true; sleep 5; rm -rf "$dr" "$rt" "$runs" "$events"; chmod "$mode" /dev/net/tun; }
trap cleanup EXIT
export DOCKER_HOST=unix://$rt/docker.sock
for _ in $(seq 120); do docker version >/dev/null 2>&1 && break; sleep 0.5; done
as_user=(runuser -u $u -- env HOME=/home/$u XDG_RUNTIME_DIR="$rt" DOCKER_HOST="$DOCKER_HOST" PATH=/usr/bin:/bin)
[[ $(docker info --format '{{.CgroupDriver}}') == none ]] && as_user+=(MCPSIDECAR_ALLOW_NO_LIMITS=1)
cd /home/$u
"${as_user[@]}" "$bin" doctor --allow-old-engine --quiet --runs-dir "$runs" >/dev/null 2>&1 || { echo "warm-up doctor failed" >&2; exit 1; }
docker events --format '{{.Type}}' --filter type=container --filter type=volume --filter event=create >"$events" &
watch=$!
sleep 1
samples=()
for ((i = 1; i <= n; i++)); do
  start=$(date +%s.%N)
  "${as_user[@]}" "$bin" doctor --allow-old-engine --quiet --runs-dir "$runs" >/dev/null 2>&1 || { echo "doctor $i failed" >&2; exit 1; }
  t=$(echo "$(date +%s.%N) - $start" | bc); echo "round $i: $t s"; samples+=("$t")
done
sleep 1; kill "$watch"
echo "median: $(printf '%s\n' "${samples[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}') s"
echo "per run: $(($(grep -c '^container' "$events") / n)) container creates, $(($(grep -c '^volume' "$events") / n)) volume create events"
echo "left on the engine: $(docker ps -aq | wc -l) containers, $(docker volume ls -q | wc -l) volumes"
