#!/usr/bin/env bash
# Finding: a tool call still in flight when the workload exits reaches the MCP
# server, but the gateway's decision log has no line for the request that
# carried it: the harness stops the gateway with SIGTERM and kills it 5 s
# later, while the gateway waits up to --shutdown-timeout (10 s) for forwarded
# requests before it writes their lines. (The sidecar's audit does keep a
# line, with an EOF error.)   Exit: 0 held, 1 vulnerable, 2 could not run.
source "$(dirname "$0")/../lib.sh"
need_base_image
build_bin
here=$(cd "$(dirname "$0")" && pwd)
ctx=$WORK/unrecorded-call
mkdir -p "$ctx"
cp "$here/attack.py" "$ctx/"
printf 'FROM %s\nCOPY attack.py /app/attack.py\n' "$BASE_IMAGE" >"$ctx/Dockerfile"
docker build -q -t rt2-unrecorded:local "$ctx" >/dev/null
cp "$RT2_DIR/spec.toml" "$ctx/spec.toml"
: >"$WORK/fixture.log"
start_fixture
runs=$ctx/runs
"$MCPSIDECAR_BIN" run --allow-old-engine --quiet --spec "$ctx/spec.toml" --runs-dir "$runs" \
	--image rt2-unrecorded:local --pull never -- python3 /app/attack.py >"$ctx/stdout" 2>"$ctx/stderr" || true
run=$(latest_run "$runs")
grep '^RT2' "$ctx/stdout" || { cat "$ctx/stderr"; exit 2; }
echo "run directory: $run"
received=$(grep -c 'slow call started' "$WORK/fixture.log" || true)
audited=$(grep -c '"slow"' "$run/mcp-sidecar-tool-calls.jsonl" || true)
cid=$(grep '"slow"' "$run/mcp-sidecar-tool-calls.jsonl" | grep -o '"correlation_id":"[0-9a-f]*"' | head -1 | cut -d'"' -f4 || true)
decided=$(grep -c "\"correlation_id\":\"$cid\"" "$run/egress-decisions.jsonl" || true)
timeline=$(grep -c '"slow"' "$run/timeline.jsonl" || true)
echo "MCP server received the slow call: $received; sidecar audit lines for it: $audited (correlation id $cid); gateway decision lines for it: $decided; timeline events: $timeline"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print("container exit codes:", {c["role"]: c.get("exit_code") for c in m["containers"]})' "$run/run-metadata.json"
python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["verdict"]; print("run verdict ok:", v["ok"], [c["name"] for c in v["checks"] if not c["ok"]])' "$run/run-metadata.json"
echo "sidecar and gateway decisions (last lines):"
tail -2 "$run/egress-decisions.jsonl" | cut -c1-260
if [ "$received" -ge 1 ] && [ "$decided" -eq 0 ]; then
	echo "VULNERABLE: the MCP server received a request the gateway's decision log does not show"
	exit 1
fi
echo "HELD"
