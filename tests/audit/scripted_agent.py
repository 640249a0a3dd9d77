"""A scripted ACP agent for the audit tests: standard library only, real stdio.

It answers ``initialize`` and ``session/new`` (a fresh random session id each
time), and on ``session/prompt`` plays a script: a JSON list of steps, each

- ``{"request": METHOD, "params": {...}}``: a request to the client, waited for;
- ``{"update": {...}}``: a ``session/update`` notification;
- ``{"say": TEXT}``: an agent message;
- ``{"write": PATH, "text": TEXT}``: a file written by the agent itself, as
  agents that run their own tools do (no ``fs/*``);
- ``{"sleep": SECONDS}``: a pause;
- ``{"usage": {...}}``: the ``usage`` the prompt's answer will carry (token counts);
- ``{"repeat": N, "steps": [...]}``: the steps N times (``{i}`` is the round);
- ``{"fetch": URL}``: a GET through the proxy variables, as an agent calls its
  model API; one that fails ends the prompt with an error naming it;
- ``{"shell": LINE}``: ``/bin/sh -c LINE`` run by the agent itself (its own
  tool, in its own sandbox when it has one), its output said as a message;
- ``{"raw": LINE}``: LINE written on stdout as it is, answer not waited for
  (what a broken or hostile agent sends: ``NaN``, a line that is not JSON);
- ``{"mcp": NAME, "send": [MESSAGE, ...]}``: the MCP server ``NAME`` of
  ``session/new``'s ``mcpServers`` started as the entry says, each message
  written to it as a line, the answer to each one with an ``id`` read back and
  said as a message (30 s each at most), then its stdin closed.

Strings may hold ``{cwd}``, ``{session}``, ``{i}``, ``{arg}`` (this program's
last argument, e.g. a raw agent arg) and ``{env:NAME}`` (a variable it was given).

``--received FILE``: every answer to a request is appended to FILE (one JSON
line: session, method, the request's key -- its toolCallId or path -- and
whether it was an error) *before* the agent acts on it, and flushed, so that a
test can check that every answer the agent received is in the audit log. The
agent holds an exclusive lock on FILE while it runs.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

# The loop every stdlib agent shares, by path: it runs in sandboxes (stdlib only).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "governor" / "agents"))
from stdio_peer import Peer


class ApiError(Exception):
    """A fetch step failed: the prompt ends with this error."""


class Agent:
    def __init__(self, script: list[Any], received: str | None, arg: str) -> None:
        self.script = script
        self.arg = arg
        self.peer = Peer()
        self.session = ""
        self.cwd = ""
        self.mcp_servers: dict[str, dict[str, Any]] = {}
        self.usage: dict[str, Any] | None = None
        self.received = open(received, "a", encoding="utf-8") if received else None  # noqa: SIM115
        if self.received is not None:
            fcntl.flock(self.received.fileno(), fcntl.LOCK_EX)

    def send(self, message: dict[str, Any]) -> None:
        self.peer.send(message)

    def fill(self, value: Any, i: int) -> Any:
        if isinstance(value, str):
            out = (
                value.replace("{cwd}", self.cwd)
                .replace("{session}", self.session)
                .replace("{i}", str(i))
                .replace("{arg}", self.arg)
            )
            while "{env:" in out:
                start = out.index("{env:")
                end = out.index("}", start)
                out = out[:start] + os.environ.get(out[start + 5 : end], "") + out[end + 1 :]
            return out
        if isinstance(value, list):
            return [self.fill(v, i) for v in value]
        if isinstance(value, dict):
            return {k: self.fill(v, i) for k, v in value.items()}
        return value

    def request(self, method: str, params: dict[str, Any]) -> None:
        self.note(method, params, self.peer.request(method, params))

    def note(self, method: str, params: dict[str, Any], answer: dict[str, Any]) -> None:
        if self.received is None:
            return
        call = params.get("toolCall") or {}
        key = call.get("toolCallId") or params.get("path") or params.get("command")
        error = answer.get("error")
        line: dict[str, Any] = {
            "session": self.session,
            "method": method,
            "key": key,
            "error": None if error is None else error.get("code"),
        }
        if method == "elicitation/create" and isinstance(answer.get("result"), dict):
            line["result"] = answer["result"]
        self.received.write(
            json.dumps(line)
            + "\n"
        )
        self.received.flush()

    def play(self, steps: list[Any], i: int = 0) -> None:
        for step in steps:
            if self.peer.cancelled:
                return
            if "repeat" in step:
                for k in range(int(step["repeat"])):
                    self.play(step["steps"], k)
            elif "request" in step:
                self.request(step["request"], self.fill(step.get("params", {}), i))
            elif "raw" in step:
                self.peer.write(self.fill(step["raw"], i).encode() + b"\n")
            elif "update" in step:
                self.notify(self.fill(step["update"], i))
            elif "write" in step:
                with open(self.fill(step["write"], i), "w", encoding="utf-8") as handle:
                    handle.write(self.fill(step.get("text", ""), i))
            elif "sleep" in step:
                time.sleep(float(step["sleep"]))
            elif "usage" in step:
                self.usage = step["usage"]
            elif "fetch" in step:
                import urllib.request

                url = self.fill(step["fetch"], i)
                try:
                    with urllib.request.urlopen(url, timeout=10) as answer:
                        self.notify({"sessionUpdate": "agent_message_chunk",
                                     "content": {"type": "text", "text": answer.read().decode()}})
                except OSError as e:
                    raise ApiError(f"API error: {url}: {e}") from None
            elif "shell" in step:
                import subprocess

                ran = subprocess.run(["/bin/sh", "-c", self.fill(step["shell"], i)],
                                     capture_output=True, text=True, timeout=60)  # fmt: skip
                self.notify({"sessionUpdate": "agent_message_chunk",
                             "content": {"type": "text", "text": ran.stdout + ran.stderr}})  # fmt: skip
            elif "mcp" in step:
                self.mcp(self.mcp_servers[step["mcp"]], self.fill(step.get("send", []), i))
            elif "say" in step:
                self.notify(
                    {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": self.fill(step["say"], i)},
                    }
                )

    def mcp(self, entry: dict[str, Any], messages: list[dict[str, Any]]) -> None:
        import select
        import subprocess

        env = {**os.environ, **{e["name"]: e["value"] for e in entry.get("env", [])}}  # as agents do
        server = subprocess.Popen(
            [entry["command"], *entry.get("args", [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        assert server.stdin is not None and server.stdout is not None
        said = []
        for message in messages:
            server.stdin.write((json.dumps(message) + "\n").encode())
            server.stdin.flush()
            if "id" in message:
                ready, _, _ = select.select([server.stdout], [], [], 30)
                said.append(server.stdout.readline().decode() if ready else "(no answer)\n")
        server.stdin.close()
        server.wait(timeout=30)
        self.notify({"sessionUpdate": "agent_message_chunk",
                     "content": {"type": "text", "text": "".join(said)}})  # fmt: skip

    def notify(self, update: dict[str, Any]) -> None:
        self.send(
            {"method": "session/update", "params": {"sessionId": self.session, "update": update}}
        )

    def serve(self) -> int:
        while True:
            message = self.peer.receive()
            if message is None:
                return 0
            method, mid = message.get("method"), message.get("id")
            params = message.get("params") or {}
            if method == "initialize":
                if self.received is not None:
                    caps = params.get("clientCapabilities")
                    self.received.write(json.dumps({"method": method, "capabilities": caps}) + "\n")
                    self.received.flush()
                self.send(
                    {
                        "id": mid,
                        "result": {
                            "protocolVersion": 1,
                            "agentCapabilities": {},
                            "authMethods": [],
                            "agentInfo": {"name": "scripted", "version": "1"},
                        },
                    }
                )
            elif method == "session/new":
                self.session = f"s-{uuid.uuid4().hex}"
                self.cwd = params.get("cwd") or os.getcwd()
                self.mcp_servers = {s.get("name"): s for s in params.get("mcpServers") or []}
                self.send({"id": mid, "result": {"sessionId": self.session}})
            elif method == "session/prompt":
                self.peer.cancelled = False
                try:
                    self.play(self.script)
                except ApiError as e:
                    self.send({"id": mid, "error": {"code": -32603, "message": str(e)}})
                    continue
                stop = "cancelled" if self.peer.cancelled else "end_turn"
                usage = {} if self.usage is None else {"usage": self.usage}
                self.send({"id": mid, "result": {"stopReason": stop, **usage}})
            elif method == "session/cancel":
                self.peer.cancelled = True
            elif mid is not None and method is not None:
                self.peer.fail(mid, -32601, "method not found")


def main(argv: list[str]) -> int:
    script: list[Any] = []
    received: str | None = None
    args = list(argv)
    while args and args[0].startswith("--"):
        flag = args.pop(0)
        if flag == "--script":
            with open(args.pop(0), encoding="utf-8") as f:
                script = json.load(f)
        elif flag == "--received":
            received = args.pop(0)
        else:
            args.insert(0, flag)
            break
    return Agent(script, received, argv[-1] if argv else "").serve()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
