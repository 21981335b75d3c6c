#!/usr/bin/env python3
"""Runs as the workload. Starts a tool call the MCP server takes 30 s to
answer, gives up after 2 s and exits 0. The call has reached the server."""
import http.client, json, socket

sess = {}


def mcp(msg, timeout=20):
    c = http.client.HTTPConnection("mcp-sidecar", 8000, timeout=timeout)
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
try:
    mcp({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "echo", "arguments": {"text": "slow"}}}, timeout=2)
except (socket.timeout, TimeoutError) as e:
    print("RT2 gave up on the slow call:", e, flush=True)
print("RT2 exiting 0", flush=True)
