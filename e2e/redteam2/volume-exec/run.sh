#!/usr/bin/env bash
# Finding: an image VOLUME under a writable path is an exec-capable writable
# mount the launcher's noexec check does not see; a library the workload
# writes there is loaded (ctypes.CDLL); the volume is on the host's disk
# (no tmpfs size bound), and one under the output directory keeps what is
# written there out of the run's record. test-sandbox --image on the same
# image reports G06 T12 "pass" and 0 violations.
# Usage: e2e/redteam2/volume-exec/run.sh [--test-sandbox]
# Exit: 0 held, 1 vulnerable, 2 could not run.
source "$(dirname "$0")/../lib.sh"
need_base_image
build_bin
here=$(cd "$(dirname "$0")" && pwd)
ctx=$WORK/volume-exec
mkdir -p "$ctx/vdir" && chmod 777 "$ctx/vdir"
cp "$here/attack.py" "$ctx/"
cat >"$ctx/Dockerfile" <<DOCKER
FROM $BASE_IMAGE
COPY attack.py /app/attack.py
COPY --chown=65532:65532 vdir /tmp/v
COPY --chown=65532:65532 vdir /sandbox-work/v
COPY --chown=65532:65532 vdir /sandbox-output/sub
VOLUME ["/tmp/v", "/sandbox-work/v", "/sandbox-output/sub"]
DOCKER
docker build -q -t rt2-volume-exec:local "$ctx" >/dev/null
cp "$RT2_DIR/spec.toml" "$ctx/spec.toml"
start_fixture
runs=$ctx/runs
"$MCPSIDECAR_BIN" run --allow-old-engine --quiet --spec "$ctx/spec.toml" --runs-dir "$runs" \
	--image rt2-volume-exec:local --pull never -- python3 /app/attack.py >"$ctx/stdout" 2>"$ctx/stderr" || true
run=$(latest_run "$runs")
grep '^RT2' "$ctx/stdout" || { cat "$ctx/stderr"; exit 2; }
echo "run directory: $run"
python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["verdict"]; print("run verdict ok:", v["ok"], [c["name"] for c in v["checks"] if not c["ok"]])' "$run/run-metadata.json"
if [ "${1:-}" = "--test-sandbox" ]; then
	"$MCPSIDECAR_BIN" test-sandbox --allow-old-engine --quiet --spec "$ctx/spec.toml" --runs-dir "$ctx/runs-ts" \
		--image rt2-volume-exec:local --pull never >"$ctx/ts.stdout" 2>"$ctx/ts.stderr" || true
	grep -E "^[0-9]+ probes" "$ctx/ts.stdout"
	python3 - "$(latest_run "$ctx/runs-ts")/report.json" <<'PY'
import json, sys
for g in json.load(open(sys.argv[1])):
    for p in g["capabilities"]:
        if p.get("title") == "Load a native library written at run time":
            print("test-sandbox", g["id"], p["id"], p["verdict"], "-", p["tool"]["summary"])
PY
fi
if [ -e "$run/agent/sub/hidden-from-record.txt" ]; then
	echo "output-dir volume: the file reached the run directory"
else
	echo "output-dir volume: hidden-from-record.txt is not in $run/agent/sub (the record lost it)"
fi
if grep -q '"loaded": true' "$ctx/stdout"; then
	echo "VULNERABLE: a library written at run time was mapped executable from an image VOLUME"
	exit 1
fi
echo "HELD"
