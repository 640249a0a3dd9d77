"""An ACP agent (stdlib only, real stdio) that turns on the MCP servers it is
handed, from inside its sandbox, as an agent's own Bash tool would.

    python mcp_agent.py MODE SERVER [ARG...]

It answers ``initialize`` and ``session/new`` (keeping the ``mcpServers``
entries the governor gives it), and on ``session/prompt`` plays MODE against
the entry named SERVER, writes ``answers.json`` in its working directory (the
workspace) and ends its turn:

- ``call SERVER TOOL ARGS_JSON [TOOL ARGS_JSON...]``: one session through the
  entry as given (its shim: command, args, env), ``initialize``, then each
  ``tools/call``; answers ``{"results": [text or error, ...]}``;
- ``sessions SERVER N``: N connections to the server's socket held at once,
  each sent ``initialize``; answers how many were answered, and how many
  closed or not answered in time;
- ``flood SERVER N OTHER``: writes ``before.txt``, then N connections to
  SERVER held by two child processes (so the agent's own descriptor limit is
  no bound), then, with them still held, the neighbour: one session through
  the shim of the server OTHER calling its ``echo``; answers what connected
  and what the call said;
- ``unknown SERVER``: one session through the shim: ``initialize``,
  ``notifications/initialized``, then ``notifications/tools/call`` *with an
  id*, ``notifications/message`` without one, and a ``tools/call`` of the
  server's ``received`` tool (what it was sent); answers each.

A raw connection goes to the socket the shim's arguments name (`socket_of`):
the one place that knows what a shim is handed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "governor" / "agents"))
from stdio_peer import Peer

INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "mcp-agent", "version": "1"}}


def token_line(entry: dict[str, Any]) -> bytes:
    """What the shim of ``entry`` says first on its socket: the attempt's token,
    from the entry's env (`governor.mcp.relay.McpRelay.admitted`); this agent
    holds it as a real one does, and floods as its own shims would."""
    token = next((e["value"] for e in entry.get("env", []) if e["name"] == "ACP_GOVERNOR_MCP_TOKEN"), "")
    return b"acp-governor-token " + token.encode() + b"\n"


def socket_of(entry: dict[str, Any]) -> str:
    """The relay socket the shim of ``entry`` connects to."""
    return next(a for a in entry["args"] if str(a).endswith(".sock"))


def _connect(s: socket.socket, path: str) -> None:
    """Connect as the shim does: through the folder's descriptor when the path
    is longer than a Unix socket's may be (the state folder under a deep $HOME)."""
    if len(os.fsencode(path)) <= 107:
        s.connect(path)
        return
    fd = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY)
    try:
        s.connect(f"/proc/self/fd/{fd}/{os.path.basename(path)}")
    finally:
        os.close(fd)


def connected(path: str, timeout: float) -> socket.socket:
    """A connection to ``path``; a full backlog (``EAGAIN`` on a Unix socket)
    is waited out until ``timeout``, as a blocking client would wait."""
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(timeout)
        try:
            _connect(s, path)
            return s
        except BlockingIOError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
        except OSError:
            s.close()
            raise


class Shim:
    """One MCP session through the entry's own command, as the agent's client runs it."""

    def __init__(self, entry: dict[str, Any]) -> None:
        env = {**os.environ, **{e["name"]: e["value"] for e in entry.get("env", [])}}
        self.proc = subprocess.Popen(
            [entry["command"], *entry["args"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        self.ids = iter(range(1, 10**6))

    def send(self, body: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **body}).encode() + b"\n")
        self.proc.stdin.flush()

    def ask(self, method: str, params: dict[str, Any], ident: Any = None) -> dict[str, Any]:
        ident = next(self.ids) if ident is None else ident
        self.send({"id": ident, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                return {"error": {"code": 0, "message": "the session closed"}}
            answer: dict[str, Any] = json.loads(line)
            if answer.get("id") == ident:
                return answer

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def said(answer: dict[str, Any]) -> str:
    if "error" in answer:
        return f"error {answer['error'].get('code')}: {answer['error'].get('message')}"
    content = answer.get("result", {}).get("content") or []
    return " ".join(c.get("text", "") for c in content)


def call(entry: dict[str, Any], calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    shim = Shim(entry)
    try:
        shim.ask("initialize", INIT)
        shim.send({"method": "notifications/initialized"})
        return [said(shim.ask("tools/call", {"name": tool, "arguments": args})) for tool, args in calls]
    finally:
        shim.close()


def sessions(entry: dict[str, Any], n: int) -> dict[str, int]:
    path = socket_of(entry)
    held, counts = [], {"answered": 0, "closed": 0, "other": 0}
    for _ in range(n):
        try:
            s = connected(path, 60)
        except OSError:
            counts["other"] += 1
            continue
        try:
            hello = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}).encode()
            s.sendall(token_line(entry) + hello + b"\n")
        except (BrokenPipeError, ConnectionResetError):
            counts["closed"] += 1  # the governor closed it first
            s.close()
            continue
        held.append(s)
    for s in held:  # every session is open before any is read
        try:
            line = s.makefile("rb").readline()
        except ConnectionResetError:
            line = b""
        except OSError:
            counts["other"] += 1
            continue
        counts["answered" if b'"result"' in line else "closed" if not line else "other"] += 1
    for s in held:
        s.close()
    return counts


def holder(path: str, n: int, ready: int, token: bytes) -> None:
    """A child: ``n`` connections to ``path``, each saying ``token``, held until
    killed; it writes how many connected."""
    held, count = [], 0
    for _ in range(n):
        try:
            s = connected(path, 10)
            s.sendall(token)
            held.append(s)
        except OSError:
            continue
        count += 1
    os.write(ready, f"{count}\n".encode())
    while True:
        time.sleep(60)


def flood(entry: dict[str, Any], n: int, other: dict[str, Any]) -> dict[str, Any]:
    Path("before.txt").write_text("written just before the flood\n")
    path = socket_of(entry)
    children, total = [], 0
    for share in (n // 2, n - n // 2):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            holder(path, share, write, token_line(entry))
            os._exit(0)
        os.close(write)
        children.append((pid, read))
    for _, read in children:
        with os.fdopen(read) as f:
            total += int(f.readline() or 0)
    try:
        neighbour = call(other, [("echo", {"text": "still here"})])
    finally:
        for pid, _ in children:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    return {"connected": total, "neighbour": neighbour}


def unknown(entry: dict[str, Any]) -> dict[str, Any]:
    shim = Shim(entry)
    try:
        shim.ask("initialize", INIT)
        shim.send({"method": "notifications/initialized"})
        refused = shim.ask("notifications/tools/call", {"name": "echo", "arguments": {"text": "undecided"}}, 7)
        shim.send({"method": "notifications/message", "params": {"level": "info", "data": "hello"}})
        received = shim.ask("tools/call", {"name": "received", "arguments": {}})
    finally:
        shim.close()
    return {"unknown": refused, "received": said(received)}


def play(entries: dict[str, dict[str, Any]], mode: str, args: list[str]) -> Any:
    entry = entries[args[0]]
    if mode == "call":
        pairs = list(zip(args[1::2], args[2::2], strict=True))
        return {"results": call(entry, [(tool, json.loads(given)) for tool, given in pairs])}
    if mode == "sessions":
        return sessions(entry, int(args[1]))
    if mode == "flood":
        return flood(entry, int(args[1]), entries[args[2]])
    if mode == "unknown":
        return unknown(entry)
    raise SystemExit(f"unknown mode {mode}")


def main(argv: list[str]) -> int:
    mode, args = argv[0], argv[1:]
    peer = Peer()
    session, entries = "s-1", {}
    while True:
        message = peer.receive()
        if message is None:
            return 0
        method, mid = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            peer.send({"id": mid, "result": {"protocolVersion": 1, "agentCapabilities": {},
                                              "authMethods": []}})  # fmt: skip
        elif method == "session/new":
            entries = {e["name"]: e for e in params.get("mcpServers") or []}
            peer.send({"id": mid, "result": {"sessionId": session}})
        elif method == "session/prompt":
            try:
                answers = play(entries, mode, args)
            except Exception as e:  # the test reads what went wrong
                answers = {"crashed": f"{type(e).__name__}: {e}"}
            Path("answers.json").write_text(json.dumps(answers))
            peer.send({"id": mid, "result": {"stopReason": "end_turn"}})
        elif mid is not None and method is not None:
            peer.fail(mid, -32601, "method not found")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
