"""An MCP server (stdlib only, stdio) that hands back what it was given, encoded
as a program would, and says what it was sent:

- ``echo {text}``: the text;
- ``secret {name, encoding}``: the value of its variable ``name`` as
  ``plain``, ``base64``, ``base64-inside`` (inside a longer base64 text, at the
  second alignment), ``base64url-inside`` (URL-safe, third alignment), ``hex``,
  ``HEX``, ``url`` (percent-encoded), ``reversed``, ``base32`` or ``halves``
  (the two halves apart: what ``echo ${T:0:10} ${T:10}`` in a shell-like
  server's tool hands back);
- ``received``: the methods of every message this session was sent, in order.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from urllib.parse import quote

TOOLS = [
    {"name": name, "inputSchema": {"type": "object"}} for name in ("echo", "secret", "received")
]
received: list[str] = []


def encoded(value: str, encoding: str) -> str:
    raw = value.encode()
    return {
        "plain": lambda: value,
        "base64": lambda: base64.b64encode(raw).decode(),
        "base64-inside": lambda: base64.b64encode(b"X" + raw + b"tail").decode(),
        "base64url-inside": lambda: base64.urlsafe_b64encode(b"YZ" + raw + b"!").decode(),
        "hex": lambda: raw.hex(),
        "HEX": lambda: raw.hex().upper(),
        "url": lambda: quote(value, safe=""),
        "reversed": lambda: value[::-1],
        "base32": lambda: base64.b32encode(raw).decode(),
        "halves": lambda: value[: len(value) // 2] + " " + value[len(value) // 2 :],
    }[encoding]()


def answer(name: str, arguments: dict[str, str]) -> str:
    if name == "echo":
        return arguments.get("text", "")
    if name == "secret":
        return f"{arguments['encoding']}: {encoded(os.environ.get(arguments['name'], ''), arguments['encoding'])}"
    return json.dumps(received)


def send(body: object) -> None:
    sys.stdout.write(json.dumps(body) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    method, ident = message.get("method"), message.get("id")
    received.append(str(method))
    if ident is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": ident, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "encoding", "version": "1"},
        }})  # fmt: skip
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        text = answer(message["params"]["name"], message["params"].get("arguments") or {})
        send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": text}]}})
    else:  # a server that carries out whatever it is sent, as JSON-RPC allows
        send({"jsonrpc": "2.0", "id": ident, "result": {"carried_out": method}})
