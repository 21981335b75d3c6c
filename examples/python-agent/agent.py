#!/usr/bin/env python3
"""A workload of your own for mcpsidecar, in Python with the standard library only.

It does the seed's task: read the answer-format resource from the MCP sidecar,
let the model search Microsoft Learn code samples through the sidecar, and
save the model's answer to the output directory, then print it.

Everything it needs comes from the environment the sandbox gives it:

  MCP_SIDECAR_URL        the sidecar's MCP endpoint (streamable HTTP)
  OPENAI_BASE_URL        the model API (the egress gateway's credential listener)
  OPENAI_API_KEY         a per-run placeholder: the gateway holds the real key
  OPENAI_MODEL           model name (default gpt-4.1-mini)
  MCPSIDECAR_QUESTION    the question (default: the seed's)
  MCPSIDECAR_OUTPUT_DIR  where answer.txt goes (default /sandbox-output)
  HTTP_PROXY/NO_PROXY    honoured by urllib as usual

It starts no other program and writes only answer.txt, so it runs without the
shell_access capability.
"""

import json
import os
import sys
import urllib.error
import urllib.request

QUESTION = "How should an instance of HttpClient be obtained when using C# and .NET 8?"
FORMAT_URI = "mcp-sidecar://instructions/answer-format.md"
SEARCH_TOOL = "microsoft_code_sample_search"
PROTOCOL_VERSION = "2025-06-18"
MAX_TURNS = 12
TIMEOUT = 90
MAX_ANSWER = 64 << 10

# One opener for everything: urllib reads HTTP_PROXY, HTTPS_PROXY and
# NO_PROXY from the environment (the sidecar and the model's base URL are in
# NO_PROXY; anything else goes to the egress gateway).
OPENER = urllib.request.build_opener()


def log(msg):
    print("python-agent: " + msg, file=sys.stderr, flush=True)


def post(url, body, headers):
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json", **headers})
    return OPENER.open(req, timeout=TIMEOUT)


class MCP:
    """A minimal MCP client over streamable HTTP: every message is a POST to
    one endpoint; the server answers with JSON or with an SSE stream whose
    events carry JSON-RPC messages; the session id comes back on initialize
    and goes on every later request."""

    def __init__(self, url):
        self.url = url
        self.session = None
        self.next_id = 0

    def headers(self):
        h = {"Accept": "application/json, text/event-stream"}
        if self.session:
            h["Mcp-Session-Id"] = self.session
            h["MCP-Protocol-Version"] = PROTOCOL_VERSION
        return h

    def request(self, method, params):
        self.next_id += 1
        rid = self.next_id
        msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        try:
            resp = post(self.url, msg, self.headers())
        except urllib.error.HTTPError as e:
            raise RuntimeError("MCP %s: HTTP %d: %s" % (method, e.code, e.read(500).decode(errors="replace")))
        with resp:
            if method == "initialize":
                self.session = resp.headers.get("Mcp-Session-Id")
            ctype = resp.headers.get("Content-Type", "")
            if ctype.startswith("text/event-stream"):
                reply = self._from_sse(resp, rid)
            elif ctype.startswith("application/json"):
                reply = json.load(resp)
            else:
                raise RuntimeError("MCP %s: unexpected Content-Type %r" % (method, ctype))
        if "error" in reply:
            raise RuntimeError("MCP %s: %s" % (method, reply["error"].get("message")))
        return reply["result"]

    @staticmethod
    def _from_sse(resp, rid):
        # Server-sent events: "data:" lines up to a blank line make one
        # event; the stream may carry notifications before our response.
        data = []
        for raw in resp:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
                continue
            if line or not data:
                continue
            msg = json.loads("\n".join(data))
            data = []
            if msg.get("id") == rid and ("result" in msg or "error" in msg):
                return msg
        raise RuntimeError("MCP: the event stream ended without the response to request %d" % rid)

    def notify(self, method):
        with post(self.url, {"jsonrpc": "2.0", "method": method}, self.headers()) as resp:
            if resp.status not in (200, 202):
                raise RuntimeError("MCP %s: HTTP %d" % (method, resp.status))

    def initialize(self):
        result = self.request("initialize", {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "mcpsidecar-python-agent", "version": "1.0"},
        })
        self.notify("notifications/initialized")
        return result

    def call_tool(self, name, arguments):
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        text = "\n".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")
        if result.get("isError"):
            return "error: " + text
        return text

    def read_resource(self, uri):
        result = self.request("resources/read", {"uri": uri})
        return "\n".join(c.get("text", "") for c in result.get("contents", []))


def chat(base_url, key, body):
    url = base_url.rstrip("/") + "/chat/completions"
    try:
        with post(url, body, {"Authorization": "Bearer " + key}) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as e:
        raise RuntimeError("model: HTTP %d: %s" % (e.code, e.read(1000).decode(errors="replace")))


def function(name, description, parameters):
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def main():
    sidecar = os.environ.get("MCP_SIDECAR_URL", "http://mcp-sidecar:8000/mcp")
    base_url = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
    key = os.environ.get("OPENAI_API_KEY", "")
    model = os.environ.get("OPENAI_MODEL", "gpt-4.1-mini")
    question = os.environ.get("MCPSIDECAR_QUESTION") or QUESTION
    out_dir = os.environ.get("MCPSIDECAR_OUTPUT_DIR", "/sandbox-output")
    if not key:
        log("OPENAI_API_KEY is not set")
        return 2

    mcp = MCP(sidecar)
    info = mcp.initialize()
    log("connected to %s (%s)" % (info.get("serverInfo", {}).get("name", "?"), sidecar))
    listed = mcp.request("tools/list", {}).get("tools", [])
    search = next((t for t in listed if t["name"] == SEARCH_TOOL), None)
    if search is None:
        log("the sidecar offers no %s tool" % SEARCH_TOOL)
        return 1

    tools = [
        function("read_answer_format", "Read the required answer format. Call this first.",
                 {"type": "object", "properties": {}, "additionalProperties": False}),
        function(SEARCH_TOOL, search.get("description", "Search code samples."), search["inputSchema"]),
        function("save_answer", "Save the complete final answer.",
                 {"type": "object", "properties": {"text": {"type": "string", "description": "the complete answer"}},
                  "required": ["text"], "additionalProperties": False}),
    ]
    messages = [
        {"role": "system", "content": "You answer programming questions. First call read_answer_format, then "
                                      "search code samples with %s, then call save_answer with the complete "
                                      "answer in the required format." % SEARCH_TOOL},
        {"role": "user", "content": question},
    ]
    answer = None
    for _ in range(MAX_TURNS):
        reply = chat(base_url, key, {"model": model, "messages": messages, "tools": tools})
        msg = reply["choices"][0]["message"]
        calls = msg.get("tool_calls") or []
        # Send back only what the API accepts in an assistant message.
        echo = {"role": "assistant", "content": msg.get("content")}
        if calls:
            echo["tool_calls"] = [{"id": c["id"], "type": "function",
                                   "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"] or "{}"}}
                                  for c in calls]
        messages.append(echo)
        if not calls:
            if answer is not None:
                break
            messages.append({"role": "user", "content": "Call save_answer with the complete answer."})
            continue
        for c in calls:
            name = c["function"]["name"]
            try:
                args = json.loads(c["function"]["arguments"] or "{}")
            except json.JSONDecodeError as e:
                result = "error: arguments are not JSON: %s" % e
            else:
                result = run_tool(mcp, name, args, out_dir)
                if name == "save_answer" and not result.startswith("error"):
                    answer = args["text"]
            log("%s -> %d bytes" % (name, len(result)))
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": result[:32 << 10]})
    if answer is None:
        log("the model never saved an answer")
        return 1
    # The answer exactly as saved: one final newline, not two.
    print(answer, end="" if answer.endswith("\n") else "\n")
    return 0


def run_tool(mcp, name, args, out_dir):
    if not isinstance(args, dict):
        return "error: arguments must be a JSON object"
    if name == "read_answer_format":
        return mcp.read_resource(FORMAT_URI)
    if name == SEARCH_TOOL:
        return mcp.call_tool(SEARCH_TOOL, args)
    if name == "save_answer":
        text = args.get("text")
        if not isinstance(text, str) or not text.strip():
            return "error: text must be a non-empty string"
        if len(text.encode()) > MAX_ANSWER:
            return "error: the answer is over %d bytes" % MAX_ANSWER
        tmp = os.path.join(out_dir, ".answer.txt.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, os.path.join(out_dir, "answer.txt"))
        return "saved"
    return "error: unknown tool %r" % name


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # one line, not a traceback, for the run's log
        log("error: %s" % e)
        sys.exit(1)
