#!/usr/bin/env bash
# Finding: the sidecar's URL-argument rule checks only the exact declared key.
# "URL"/"Url" for a declared "url" passes unchecked to the MCP server, and a
# server that decodes arguments with Go's encoding/json (the MCP go-sdk's
# typed tool handlers) reads it as its url field: the rule is bypassed.
# Usage: e2e/redteam2/urlarg-case/run.sh      Exit: 0 held, 1 vulnerable, 2 could not run.
source "$(dirname "$0")/../lib.sh"
need_base_image
build_bin
here=$(cd "$(dirname "$0")" && pwd)
ctx=$WORK/urlarg-case
mkdir -p "$ctx"
cp "$here/attack.py" "$ctx/"
printf 'FROM %s\nCOPY attack.py /app/attack.py\n' "$BASE_IMAGE" >"$ctx/Dockerfile"
docker build -q -t rt2-urlarg:local "$ctx" >/dev/null
cp "$RT2_DIR/spec.toml" "$ctx/spec.toml"
: >"$WORK/fixture.log"
start_fixture
runs=$ctx/runs
"$MCPSIDECAR_BIN" run --allow-old-engine --quiet --spec "$ctx/spec.toml" --runs-dir "$runs" \
	--image rt2-urlarg:local --pull never -- python3 /app/attack.py >"$ctx/stdout" 2>"$ctx/stderr" || true
run=$(latest_run "$runs")
grep '^RT2' "$ctx/stdout" | cut -c1-300 || { cat "$ctx/stderr"; exit 2; }
echo "run directory: $run"
echo "what the MCP server received (fixture log):"
python3 - "$WORK/fixture.log" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    body = json.loads(json.loads(l).get("body") or "{}")
    if body.get("method") == "tools/call":
        print("  tools/call arguments:", json.dumps(body["params"]["arguments"]))
PY
# How a Go MCP server decodes those arguments (encoding/json matches keys case-insensitively).
mkdir -p "$ctx/godemo"
cat >"$ctx/godemo/main.go" <<'GO'
package main

import (
	"encoding/json"
	"fmt"
)

type fetchArgs struct {
	URL string `json:"url"`
}

func main() {
	var a fetchArgs
	_ = json.Unmarshal([]byte(`{"URL":"http://host.docker.internal:18099/internal-only"}`), &a)
	fmt.Printf("a Go server's url field: %q\n", a.URL)
}
GO
(cd "$ctx/godemo" && GO111MODULE=off go run main.go)
if grep -q 'URL\\":\\"http://host.docker.internal:18099' "$WORK/fixture.log"; then
	echo "VULNERABLE: an off-host URL reached the server under a case variant of the declared url argument"
	exit 1
fi
echo "HELD"
