#!/usr/bin/env python3
"""Host-side fixture: a minimal MCP streamable-HTTP server (tool "echo") on
0.0.0.0:18081 and a plain HTTP server on 0.0.0.0:18082. Logs each request as
one JSON line to argv[1]. Reached only by this machine's own containers."""
import json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = sys.argv[1] if len(sys.argv) > 1 else "/dev/null"
lock = threading.Lock()


def log(**kw):
    kw["t"] = time.time()
    with lock, open(LOG, "a") as f:
        f.write(json.dumps(kw) + "\n")


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, code, body=b"", ctype="application/json"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        log(port=self.server.server_address[1], method="GET", path=self.path, headers=dict(self.headers))
        self.reply(200, b'{"ok":true}')

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        log(port=self.server.server_address[1], method="POST", path=self.path, body=body.decode(errors="replace")[:2000])
        try:
            msg = json.loads(body)
        except ValueError:
            msg = {}
        if "id" not in msg:
            return self.reply(202)
        m = msg.get("method")
        if m == "initialize":
            res = {"protocolVersion": msg.get("params", {}).get("protocolVersion", "2025-06-18"),
                   "capabilities": {"tools": {}}, "serverInfo": {"name": "rt2fix", "version": "1"}}
        elif m == "tools/list":
            res = {"tools": [{"name": "echo", "description": "Echo text.",
                              "inputSchema": {"type": "object", "properties": {"text": {"type": "string"},
                                                                               "url": {"type": "string", "format": "uri"}}}}]}
        elif m == "tools/call" and msg.get("params", {}).get("arguments", {}).get("text") == "slow":
            log(port=self.server.server_address[1], event="slow call started; answering in 30 s")
            time.sleep(30)
            res = {"content": [{"type": "text", "text": "slow done"}]}
        elif m == "tools/call":
            res = {"content": [{"type": "text", "text": json.dumps(msg.get("params", {}).get("arguments", {}))}]}
        else:
            res = {}
        self.reply(200, json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": res}).encode())


for port in (18081, 18082):
    srv = ThreadingHTTPServer(("0.0.0.0", port), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
while True:
    time.sleep(3600)
