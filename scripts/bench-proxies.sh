#!/bin/sh
# bench-proxies.sh: the egress gateway against smokescreen and Debian's
# Squid, side by side in one run (issue 19; docs/PERFORMANCE.md,
# "Issue 19 — side by side"). Loopback only: every proxy listens on
# 127.0.0.1 and reaches an in-process Go upstream on 127.0.0.1 by IP
# literal, which each proxy's configuration allows (and no other private
# address). Each proxy is pinned to one core (taskset -c 1), the load
# generator and the upstream to the other (taskset -c 0).
#
#   scripts/bench-proxies.sh [BIN] [proxybench flags...]
#
# BIN defaults to bin/mcpsidecar (built with make build when absent).
# smokescreen is installed with `go install` from the module proxy when
# it is not in $(go env GOPATH)/bin; Squid comes from Debian
# (apt-get install squid). Flags after BIN go to scripts/proxybench, e.g.
# -rounds 5 -http-n 20000 -engines ours,smokescreen.
set -eu
cd "$(dirname "$0")/.."
SMOKESCREEN_VERSION=v0.1.0

bin=${1:-bin/mcpsidecar}
[ $# -gt 0 ] && shift
if [ ! -x "$bin" ]; then
	make build
fi
# The binary could be replaced by a build while the benchmark runs.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$bin" "$work/mcpsidecar"

smokescreen="$(go env GOPATH)/bin/smokescreen"
if [ ! -x "$smokescreen" ]; then
	go install "github.com/stripe/smokescreen@$SMOKESCREEN_VERSION"
fi
squid=$(command -v squid || echo /usr/sbin/squid)
if [ ! -x "$squid" ]; then
	echo "bench-proxies: squid not found: apt-get install squid" >&2
	exit 1
fi
if [ "$(nproc)" -lt 2 ]; then
	echo "bench-proxies: needs two cores (proxy on one, load generator on the other)" >&2
	exit 1
fi

go build -o "$work/proxybench" ./scripts/proxybench
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# smokescreen $("$smokescreen" --version 2>&1 | tail -1), $("$squid" -v | head -1)"
taskset -c 0 "$work/proxybench" -bin "$work/mcpsidecar" -smokescreen "$smokescreen" \
	-squid "$squid" -proxy-cpu 1 "$@"
