#!/usr/bin/env bash
# build-jaeger.sh: a real OpenTelemetry collector for the export tests
# (issue 33): Jaeger v1.75.0's all-in-one binary (the OTel-collector based
# cmd/jaeger), built from the Go module proxy into a cache, once per
# machine (about 7 minutes on 2 cores). Prints the binary's path.
#
# Usage: scripts/build-jaeger.sh
#   MCPSIDECAR_JAEGER_CACHE  where it is kept (default /var/cache/mcpsidecar-jaeger)
set -euo pipefail
version=v1.75.0
cache=${MCPSIDECAR_JAEGER_CACHE:-/var/cache/mcpsidecar-jaeger}
bin=$cache/jaeger-$version
if [[ -x $bin ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$cache"
# One build at a time: a second caller waits for the first one's binary.
exec 9>"$cache/.lock"
flock 9
if [[ -x $bin ]]; then
  echo "$bin"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export CGO_ENABLED=0
cat >go.mod <<MOD
module jaegerbuild

go 1.26
MOD
echo "build-jaeger: building jaeger $version (once per machine)" >&2
go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$version" >&2
go build -o "$bin.tmp" github.com/jaegertracing/jaeger/cmd/jaeger
mv "$bin.tmp" "$bin"
echo "$bin"
