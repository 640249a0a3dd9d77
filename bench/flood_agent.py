"""A flood agent for `bench/roundtrip.py`: N permission asks and N file reads, one at a time.

It speaks ACP v1 over stdio (newline-delimited JSON-RPC 2.0) with nothing but
the standard library, so every client the bench compares drives the very same
peer. On ``session/prompt`` it sends, strictly one after another and waiting
for each answer:

1. N ``session/request_permission`` (kind ``edit``, a path inside the session's
   cwd, options ``allow_once`` / ``reject_once``);
2. N ``fs/read_text_file`` of ``flood-read.txt`` in the session's cwd (the
   bench creates it);

then reports what it got back in one ``agent_message_chunk`` and answers the
prompt ``end_turn``. The report is one line of JSON after ``flood:`` --
``{"n", "allowed", "reads_ok", "permission_s", "read_s"}`` -- so a client that
answered wrong (a refusal, an error, the wrong content) cannot pass for a
fast one. The agent checks each read against the file as it finds it at the
start of the turn.

Run: ``python bench/flood_agent.py N``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

# The loop every stdlib agent shares, by path: it runs in sandboxes (stdlib only).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "governor" / "agents"))
from stdio_peer import Closed, Peer

READ_FILE = "flood-read.txt"
"""The file (in the session's cwd) the agent reads N times; the bench writes it."""
EDIT_FILE = "src/flood.py"
"""The path (in the session's cwd) each permission ask is about; never written."""

ALLOW_ONCE = "allow"
REJECT_ONCE = "reject"


class FloodPeer(Peer):
    """A request from the client while an answer is awaited is refused at once
    (the client sends none mid-flood; an ACP client never should)."""

    def held(self, message: dict[str, Any]) -> None:
        if "id" in message:
            refuse(self, message)


def refuse(peer: Peer, message: dict[str, Any]) -> None:
    peer.fail(message["id"], -32601, f"Method not found: {message['method']}")


class Flood:
    def __init__(self, n: int) -> None:
        self.n = n
        self.peer = FloodPeer()
        self.session = ""
        self.cwd = ""

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request and wait for its answer (the client sends nothing else meanwhile,
        but a ``session/cancel`` is honoured)."""
        return self.peer.request(method, params)

    def turn(self) -> dict[str, Any]:
        edit = os.path.join(self.cwd, EDIT_FILE)
        target = os.path.join(self.cwd, READ_FILE)
        with open(target, encoding="utf-8") as f:
            expected = f.read()
        tool_call = {
            "title": f"Edit {EDIT_FILE}",
            "kind": "edit",
            "status": "pending",
            "rawInput": {"file_path": edit},
            "locations": [{"path": edit}],
        }
        options = [
            {"optionId": ALLOW_ONCE, "name": "Allow", "kind": "allow_once"},
            {"optionId": REJECT_ONCE, "name": "Reject", "kind": "reject_once"},
        ]
        allowed = reads_ok = 0
        started = time.perf_counter()
        for i in range(self.n):
            if self.peer.cancelled:
                break
            answer = self.request(
                "session/request_permission",
                {
                    "sessionId": self.session,
                    "toolCall": {"toolCallId": f"flood-{i}", **tool_call},
                    "options": options,
                },
            )
            outcome = (answer.get("result") or {}).get("outcome") or {}
            if outcome.get("outcome") == "selected" and outcome.get("optionId") == ALLOW_ONCE:
                allowed += 1
        permissions_done = time.perf_counter()
        for _ in range(self.n):
            if self.peer.cancelled:
                break
            answer = self.request("fs/read_text_file", {"sessionId": self.session, "path": target})
            if (answer.get("result") or {}).get("content") == expected:
                reads_ok += 1
        reads_done = time.perf_counter()
        return {
            "n": self.n,
            "allowed": allowed,
            "reads_ok": reads_ok,
            "permission_s": round(permissions_done - started, 6),
            "read_s": round(reads_done - permissions_done, 6),
        }

    def answer(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params") or {}
        rid = message["id"]
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": 1,
                "agentCapabilities": {"loadSession": False},
                "authMethods": [],
                "agentInfo": {"name": "flood", "title": "flood agent", "version": "1"},
            }
        elif method == "session/new":
            self.cwd = str(params.get("cwd") or os.getcwd())
            self.session = "flood-session"
            result = {"sessionId": self.session}
        elif method == "session/prompt":
            self.peer.cancelled = False
            try:
                report = self.turn()
            except Closed:
                return
            self.say("flood: " + json.dumps(report, separators=(",", ":")))
            result = {"stopReason": "cancelled" if self.peer.cancelled else "end_turn"}
        else:
            refuse(self.peer, message)
            return
        self.peer.respond(rid, result)

    def say(self, text: str) -> None:
        self.peer.notify(
            "session/update",
            {
                "sessionId": self.session,
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": text},
                },
            },
        )

    def serve(self) -> None:
        while (message := self.peer.receive()) is not None:
            if "method" in message and "id" in message:
                self.answer(message)
            # notifications (a stray session/cancel between turns) and stray answers: nothing to do


def parse_report(message: str) -> dict[str, Any]:
    """The report from the agent's final message (``flood: {...}``); ValueError if absent."""
    text = message.strip()
    if not text.startswith("flood: "):
        raise ValueError(f"not a flood report: {text[:200]!r}")
    report = json.loads(text.removeprefix("flood: "))
    if not isinstance(report, dict):
        raise ValueError(f"not a flood report: {text[:200]!r}")
    return report


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        print(
            "usage: flood_agent.py N   (N permission asks and N reads per prompt)", file=sys.stderr
        )
        return 2
    Flood(int(argv[0])).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
