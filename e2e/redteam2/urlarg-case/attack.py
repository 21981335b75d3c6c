#!/usr/bin/env python3
"""Runs as the workload. The fixture's tool "echo" declares a URL argument
"url" (format uri), so the sidecar refuses a url off the server's own host.
The same URL under the key "URL" (or "Url") is not checked and reaches the
server."""
import http.client, json

sess = {}


def mcp(msg):
    c = http.client.HTTPConnection("mcp-sidecar", 8000, timeout=20)
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
         "MCP-Protocol-Version": "2025-06-18"}
    if "sid" in sess:
        h["Mcp-Session-Id"] = sess["sid"]
    c.request("POST", "/mcp", body=json.dumps(msg), headers=h)
    r = c.getresponse()
    body = r.read().decode(errors="replace")
    if r.getheader("Mcp-Session-Id"):
        sess["sid"] = r.getheader("Mcp-Session-Id")
    return body


mcp({"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "rt2", "version": "1"}}})
mcp({"jsonrpc": "2.0", "method": "notifications/initialized"})
OFF = "http://host.docker.internal:18099/internal-only"
for i, key in enumerate(("url", "URL", "Url")):
    body = mcp({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                "params": {"name": "echo", "arguments": {key: OFF}}})
    print("RT2", json.dumps({"key": key, "answer": json.loads(body).get("result")}), flush=True)
