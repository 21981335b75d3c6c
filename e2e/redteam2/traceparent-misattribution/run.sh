#!/usr/bin/env bash
# Finding: the sidecar adopts the workload's traceparent as the tool call's
# correlation id, and the timeline links egress to calls by that id alone, so
# the workload's own egress (client = the agent, scope "agent") is shown as
# caused by the sidecar's tool call (runs show, timeline.jsonl parent,
# report.html).
# Usage: e2e/redteam2/traceparent-misattribution/run.sh
# Exit: 0 held, 1 vulnerable, 2 could not run.
source "$(dirname "$0")/../lib.sh"
need_base_image
build_bin
here=$(cd "$(dirname "$0")" && pwd)
ctx=$WORK/traceparent
mkdir -p "$ctx"
cp "$here/attack.py" "$ctx/"
printf 'FROM %s\nCOPY attack.py /app/attack.py\n' "$BASE_IMAGE" >"$ctx/Dockerfile"
docker build -q -t rt2-traceparent:local "$ctx" >/dev/null
cp "$RT2_DIR/spec.toml" "$ctx/spec.toml"
start_fixture
runs=$ctx/runs
"$MCPSIDECAR_BIN" run --allow-old-engine --quiet --spec "$ctx/spec.toml" --runs-dir "$runs" \
	--image rt2-traceparent:local --pull never -- python3 /app/attack.py >"$ctx/stdout" 2>"$ctx/stderr" || true
run=$(latest_run "$runs")
grep '^RT2' "$ctx/stdout" || { cat "$ctx/stderr"; exit 2; }
echo "run directory: $run"
"$MCPSIDECAR_BIN" runs show --runs-dir "$runs" "$(basename "$run")" 2>&1 | grep -A3 'tool call echo' || true
rc=0
python3 - "$run/timeline.jsonl" <<'PY' || rc=$?
import json, sys
import os
ev = [json.loads(l) for l in open(sys.argv[1])]
seq = {e["seq"]: e for e in ev}
dec = [json.loads(l) for l in open(os.path.join(os.path.dirname(sys.argv[1]), "egress-decisions.jsonl"))]
bad = 0
for e in ev:
    p = seq.get(e.get("parent"))
    scope = dec[e["line"] - 1].get("scope") if e["kind"] == "egress" else None
    if p and p["source"] == "sidecar" and scope == "agent":
        bad += 1
        print(f"MISATTRIBUTED: {e['summary'][:90]} (client {e.get('client')}, scope agent) -> parent {p['seq']} {p['summary']}")
sys.exit(1 if bad else 0)
PY
if [ $rc -eq 1 ]; then echo "VULNERABLE: the workload's own egress is recorded under the sidecar's tool call"; exit 1; fi
echo "HELD"
