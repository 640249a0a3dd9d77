"""A loopback MCP Streamable HTTP server that misbehaves on purpose (stdlib only),
for the relay's HTTP hostile tests.

It answers ``initialize`` (with a session id), ``notifications/*`` (202),
``tools/list`` and ``DELETE`` like any server; each tool misbehaves its own way:

- ``echo``: answers its ``message`` argument; ``ok``: answers ``ok done`` (JSON).
- ``not_json``: ``200 application/json`` with a body that is not JSON.
- ``not_jsonrpc``: ``200 application/json`` with JSON that is not JSON-RPC.
- ``html``: ``200 text/html``.
- ``error``: ``500``.
- ``flood``: an SSE answer of 3000 log notifications, then the result.
- ``silent``: never answers (the handler waits until the stand-in stops).
- ``redirect``: ``307`` to ``http://example.com/mcp``.
- ``moved``: ``307`` to ``/mcp?moved=1`` on the same host, where it answers ``moved done``.
- ``redirect_local``: ``307`` to `StandIn.redirect_to` (a test sets it: another loopback port).
- ``huge``: a ``200 application/json`` body of `HUGE` bytes, one valid JSON-RPC result,
  sent in 1 MiB writes until done or the governor hangs up (`StandIn.huge_sent` counts them).
- ``echo_header``: a JSON-RPC error whose message quotes the ``Authorization`` header it got
  (as a careless server's "invalid token ..." does).

It keeps what it saw: each request's headers and whether the session was deleted.
"""

from __future__ import annotations

import http.server
import json
import ssl
import threading
from typing import Any

SESSION = "standin-session-1"
TOOLS = (
    "echo", "ok", "moved", "not_json", "not_jsonrpc", "html", "error", "flood", "silent", "redirect",
    "redirect_local", "huge", "echo_header",
)  # fmt: skip
FLOOD = 3000
HUGE = 256 * 2**20


class StandIn:
    """The server, on 127.0.0.1 and a free port (https:// with ``tls``), until `stop`."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.headers: list[dict[str, str]] = []
        self.deleted = False
        self.released = threading.Event()
        self.redirect_to = "http://example.com/mcp"
        self.huge_sent = 0
        stand_in = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                stand_in.headers.append(dict(self.headers))
                self._reply(405, b"", "text/plain")

            def do_DELETE(self) -> None:
                stand_in.headers.append(dict(self.headers))
                stand_in.deleted = self.headers.get("mcp-session-id") == SESSION
                self._reply(200, b"", "text/plain")

            def do_POST(self) -> None:
                stand_in.headers.append(dict(self.headers))
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                method, ident = body.get("method"), body.get("id")
                if ident is None or method is None:
                    self._reply(202, b"", "text/plain")
                elif method == "initialize":
                    result = {
                        "protocolVersion": body["params"]["protocolVersion"],
                        "capabilities": {"tools": {}, "logging": {}},
                        "serverInfo": {"name": "standin", "version": "1"},
                    }
                    self._json(ident, result, session=True)
                elif method == "tools/list":
                    tools = [{"name": t, "inputSchema": {"type": "object"}} for t in TOOLS]
                    self._json(ident, {"tools": tools})
                elif method == "tools/call":
                    self._tool(ident, body["params"]["name"], body["params"].get("arguments") or {})
                else:
                    self._json(ident, {})

            def _tool(self, ident: Any, name: str, arguments: dict[str, Any]) -> None:
                done = {"content": [{"type": "text", "text": f"{name} done"}]}
                if name == "echo":
                    self._json(ident, {"content": [{"type": "text", "text": str(arguments.get("message"))}]})
                elif name == "ok" or (name == "moved" and self.path.endswith("moved=1")):
                    self._json(ident, done)
                elif name == "not_json":
                    self._reply(200, b"<html>this is not json", "application/json")
                elif name == "not_jsonrpc":
                    self._reply(200, b'{"hello": "world"}', "application/json")
                elif name == "html":
                    self._reply(200, b"<html>hello</html>", "text/html")
                elif name == "error":
                    self._reply(500, b"internal trouble", "text/plain")
                elif name in ("redirect", "moved"):
                    self.send_response(307)
                    self.send_header("Location", "http://example.com/mcp" if name == "redirect" else "/mcp?moved=1")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif name == "redirect_local":
                    self.send_response(307)
                    self.send_header("Location", stand_in.redirect_to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif name == "huge":
                    head = json.dumps({"jsonrpc": "2.0", "id": ident, "result": {"content": [
                        {"type": "text", "text": "@"}]}}).encode().split(b"@")  # fmt: skip
                    fill = HUGE - len(head[0]) - len(head[1])
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(HUGE))
                    self.end_headers()
                    chunk = b"A" * 2**20
                    try:
                        self.wfile.write(head[0])
                        while fill > 0:
                            self.wfile.write(chunk[:fill])
                            stand_in.huge_sent += min(fill, len(chunk))
                            fill -= len(chunk)
                        self.wfile.write(head[1])
                    except OSError:
                        pass
                elif name == "echo_header":
                    said = f"invalid token {self.headers.get('Authorization')}"
                    data = json.dumps({"jsonrpc": "2.0", "id": ident, "error": {"code": -32001, "message": said}})
                    self._reply(200, data.encode(), "application/json")
                elif name == "silent":
                    stand_in.released.wait(120)
                elif name == "flood":
                    events = [
                        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": i}}
                        for i in range(FLOOD)
                    ]
                    events.append({"jsonrpc": "2.0", "id": ident, "result": done})
                    data = b"".join(b"event: message\ndata: " + json.dumps(e).encode() + b"\n\n" for e in events)
                    self._reply(200, data, "text/event-stream")
                else:
                    self._json(ident, {"content": [{"type": "text", "text": "no such tool"}], "isError": True})

            def _json(self, ident: Any, result: object, *, session: bool = False) -> None:
                data = json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}).encode()
                self._reply(200, data, "application/json", session=session)

            def _reply(self, status: int, data: bytes, kind: str, *, session: bool = False) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                if session:
                    self.send_header("Mcp-Session-Id", SESSION)
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:  # https://: each connection's handshake in its handler's thread
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True, do_handshake_on_connect=False)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
