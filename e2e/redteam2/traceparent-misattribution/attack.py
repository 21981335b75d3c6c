#!/usr/bin/env python3
"""Runs as the workload. Makes one real MCP tool call through the sidecar with
a traceparent it chose, then sends its OWN egress (an allowed GET and a denied
CONNECT, straight to the gateway, not through the sidecar) carrying the same
trace-id. The timeline then files both under the sidecar's tool call."""
import http.client, json, socket

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TP = f"00-{TRACE}-00f067aa0ba902b7-01"
sess = {}


def mcp(msg, extra=None):
    c = http.client.HTTPConnection("mcp-sidecar", 8000, timeout=20)
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
         "MCP-Protocol-Version": "2025-06-18"}
    if "sid" in sess:
        h["Mcp-Session-Id"] = sess["sid"]
    h.update(extra or {})
    c.request("POST", "/mcp", body=json.dumps(msg), headers=h)
    r = c.getresponse()
    body = r.read()
    if r.getheader("Mcp-Session-Id"):
        sess["sid"] = r.getheader("Mcp-Session-Id")
    return r.status, body.decode(errors="replace")


mcp({"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "rt2", "version": "1"}}})
mcp({"jsonrpc": "2.0", "method": "notifications/initialized"})
st, body = mcp({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hello"}}}, {"traceparent": TP})
print("RT2 tool call:", st, body[:200], flush=True)


def raw(port, req):
    s = socket.create_connection(("egress-gateway", port), timeout=10)
    s.sendall(req.encode())
    out = s.recv(300).decode(errors="replace").splitlines()[0]
    s.close()
    return out


print("RT2 own allowed GET:", raw(3128, f"GET http://host.docker.internal:18082/workload-own HTTP/1.1\r\n"
                                        f"Host: host.docker.internal:18082\r\ntraceparent: {TP}\r\nConnection: close\r\n\r\n"), flush=True)
print("RT2 own denied CONNECT:", raw(3128, f"CONNECT denied.invalid:443 HTTP/1.1\r\nHost: denied.invalid:443\r\n"
                                           f"traceparent: {TP}\r\n\r\n"), flush=True)
