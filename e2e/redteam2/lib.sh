# Shared helpers for the redteam2 reproducers (sourced, not run).
# Everything stays on this machine: host fixtures listen on this host and are
# reached by the run's containers through the Docker bridge (172.17.0.1).
set -euo pipefail

RT2_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$RT2_DIR/../.." && pwd)
BASE_IMAGE=${BASE_IMAGE:-mcpsidecar-debian-python:749505f3cf2a}
WORK=${RT2_WORK:-/tmp/redteam2-work}
mkdir -p "$WORK"

# build_bin builds a static product binary into $WORK (never bin/), from the
# committed tree (git archive HEAD), so others' uncommitted edits do not
# break the build.
build_bin() {
	if [ -z "${MCPSIDECAR_BIN:-}" ]; then
		rm -rf "$WORK/src" && mkdir -p "$WORK/src"
		git -C "$REPO" archive HEAD | tar -x -C "$WORK/src"
		(cd "$WORK/src" && CGO_ENABLED=0 go build -o "$WORK/mcpsidecar" ./cmd/mcpsidecar)
		MCPSIDECAR_BIN=$WORK/mcpsidecar
	fi
	export MCPSIDECAR_BIN
}

# need_base_image fails with a hint when the Debian python image is missing.
need_base_image() {
	docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 || {
		echo "missing $BASE_IMAGE: build it with scripts/build-debian-image.sh (or set BASE_IMAGE)" >&2
		exit 2
	}
}

# start_fixture starts fixture.py (MCP on 18081, plain HTTP on 18082) and
# stops it when the script exits.
start_fixture() {
	python3 "$RT2_DIR/fixture.py" "$WORK/fixture.log" &
	FIXTURE_PID=$!
	trap 'kill $FIXTURE_PID 2>/dev/null || true' EXIT
	for _ in $(seq 50); do
		python3 - 2>/dev/null <<'PY' && return 0
import socket; socket.create_connection(("127.0.0.1", 18081), 0.2).close()
PY
		sleep 0.1
	done
	echo "fixture did not start" >&2
	exit 2
}

# latest_run prints the newest run directory under $1.
latest_run() { ls -1d "$1"/run-* | sort | tail -1; }
