#!/usr/bin/env python3
"""Host-side fixtures for the red-team runs (all on this machine only).

18081: a minimal MCP streamable-HTTP server (tool "echo").
18443: an HTTPS echo server (cert for host.docker.internal): logs and echoes
       every request's headers, so a leaked credential would show.
18444: an HTTPS server that answers every request with a redirect.
canary ports (TCP, logs any connection): 8000, 3128, 3129, 18099 on [::] and 0.0.0.0.
Log: /tmp/redteam2-work/held-fix/hits.log
"""
import json, socket, ssl, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = "/tmp/redteam2-work/held-fix/hits.log"
lock = threading.Lock()


def log(**kw):
    kw["t"] = time.strftime("%H:%M:%S")
    with lock, open(LOG, "a") as f:
        f.write(json.dumps(kw) + "\n")


class MCP(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        log(srv="mcp", method="GET", path=self.path, headers=dict(self.headers))
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self):
        self.do_GET()

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        log(srv="mcp", method="POST", path=self.path, headers=dict(self.headers), body=body.decode(errors="replace")[:2000])
        try:
            msg = json.loads(body)
        except Exception:
            msg = {}
        if "id" not in msg:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        m = msg.get("method")
        if m == "initialize":
            res = {"protocolVersion": msg.get("params", {}).get("protocolVersion", "2025-06-18"),
                   "capabilities": {"tools": {}}, "serverInfo": {"name": "rtfix", "version": "1"}}
        elif m == "tools/list":
            res = {"tools": [{"name": "echo", "description": "Echo text.",
                              "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}, "url": {"type": "string"}}}}]}
        elif m == "tools/call":
            args = msg.get("params", {}).get("arguments", {})
            res = {"content": [{"type": "text", "text": json.dumps({"args": args, "headers": dict(self.headers)})}]}
        else:
            res = {}
        out = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": res}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


class Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    redirect = False

    def log_message(self, *a):
        pass

    def handle_one(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        log(srv="echo-redirect" if self.redirect else "echo", client=self.client_address[0], method=self.command, path=self.path, headers=dict(self.headers), body=body.decode(errors="replace")[:500])
        if self.redirect:
            self.send_response(307)
            self.send_header("Location", "http://host.docker.internal:18099/stolen")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        out = json.dumps({"path": self.path, "method": self.command, "auth_len": len(self.headers.get("Authorization", "")),
                          "auth_prefix": self.headers.get("Authorization", "")[:12]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = handle_one


class Redir(Echo):
    redirect = True


def serve_tls(port, handler):
    srv = ThreadingHTTPServer(("0.0.0.0", port), handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain("/tmp/redteam2-work/held-fix/srv.pem", "/tmp/redteam2-work/held-fix/srv.key")
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


def canary(fam, addr, port):
    try:
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if fam == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind((addr, port))
        s.listen(16)
    except OSError as e:
        log(srv="canary", err=f"cannot listen {addr}:{port}: {e}")
        return

    def loop():
        while True:
            c, a = s.accept()
            c.settimeout(2)
            try:
                data = c.recv(300)
            except Exception:
                data = b""
            log(srv="canary", port=port, peer=str(a), data=data.decode(errors="replace"))
            c.close()
    threading.Thread(target=loop, daemon=True).start()


if __name__ == "__main__":
    m = ThreadingHTTPServer(("0.0.0.0", 18081), MCP)
    threading.Thread(target=m.serve_forever, daemon=True).start()
    serve_tls(18443, Echo)
    serve_tls(18444, Redir)
    for p in (8000, 3128, 3129, 18099):
        canary(socket.AF_INET, "0.0.0.0", p)
        canary(socket.AF_INET6, "::", p)
    log(srv="fixtures", msg="up")
    while True:
        time.sleep(3600)
