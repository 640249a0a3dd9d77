"""An ACP agent that can load its session but not resume it (standard library
only, real stdio), for `test_pause_resume`: ``loadSession`` advertised, no
``sessionCapabilities.resume``.

Each prompt asks permission to write ``x.txt`` (an edit) and, allowed, writes it
through the client. ``session/load`` replays the session's history before it
answers, as ACP says: the first prompt, and the write's tool call reported
*completed* (what a governor that folded the replay would count as a second
tool call and as a change made without asking).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

SESSION = "loading-session-1"
_next = 0


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def update(body: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SESSION, "update": body}})


def request(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A request to the client, its answer waited for (notifications skipped)."""
    global _next
    _next += 1
    send({"jsonrpc": "2.0", "id": f"a{_next}", "method": method, "params": params})
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("id") == f"a{_next}" and "method" not in message:
            return dict(message)
    raise SystemExit(0)


def tool_call(path: str, status: str) -> dict[str, Any]:
    return {
        "toolCallId": "write-x", "title": "Write x.txt", "kind": "edit", "status": status,
        "rawInput": {"file_path": path}, "locations": [{"path": path}],
    }  # fmt: skip


def prompt(cwd: str) -> str:
    path = os.path.join(cwd, "x.txt")
    update({"sessionUpdate": "tool_call", **tool_call(path, "pending")})
    answer = request(
        "session/request_permission",
        {
            "sessionId": SESSION,
            "toolCall": tool_call(path, "pending"),
            "options": [
                {"optionId": "once", "name": "Allow", "kind": "allow_once"},
                {"optionId": "no", "name": "Reject", "kind": "reject_once"},
            ],
        },
    )
    outcome = (answer.get("result") or {}).get("outcome") or {}
    if outcome.get("optionId") != "once":
        update({"sessionUpdate": "tool_call_update", "toolCallId": "write-x", "status": "failed"})
        return "cancelled" if outcome.get("outcome") == "cancelled" else "end_turn"
    request("fs/write_text_file", {"sessionId": SESSION, "path": path, "content": "loaded\n"})
    update({"sessionUpdate": "tool_call_update", "toolCallId": "write-x", "status": "completed"})
    return "end_turn"


def main() -> int:
    cwd = os.getcwd()
    for line in sys.stdin:
        message = json.loads(line)
        method, mid, params = message.get("method"), message.get("id"), message.get("params") or {}
        if method == "initialize":
            caps = {"loadSession": True}
            result: Any = {"protocolVersion": 1, "agentCapabilities": caps, "authMethods": []}
        elif method == "session/new":
            cwd = params.get("cwd") or cwd
            result = {"sessionId": SESSION}
        elif method == "session/load":
            cwd = params.get("cwd") or cwd
            if params.get("sessionId") != SESSION:
                send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32002, "message": "no such session"}})
                continue
            update({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "first prompt"}})
            update({"sessionUpdate": "tool_call", **tool_call(os.path.join(cwd, "x.txt"), "completed")})
            result = None
        elif method == "session/prompt":
            result = {"stopReason": prompt(cwd)}
        elif mid is None:
            continue  # session/cancel and other notifications
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"no {method}"}})
            continue
        send({"jsonrpc": "2.0", "id": mid, "result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
