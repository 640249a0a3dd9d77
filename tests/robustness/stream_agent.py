"""An ACP agent that streams N ``session/update`` notifications in one turn (stdlib only).

    python stream_agent.py N [--now]

On ``session/prompt`` it writes N notifications as fast as the pipe takes them
-- the kinds whose state the governor keeps bounded: thoughts, whole messages
(a new ``messageId`` every tenth), the plan, usage, and updates of one tool
call -- then a last message ``stream: N sent`` and ``end_turn``. The lines are
built before the clock could start, so a reader measures itself, not this
agent. The first and the last notification are message chunks, so a client's
``message`` events mark the start and the end of the stream.

``--now`` streams at once, without the ACP handshake: the bare baseline of
`bench/load.py` reads it with nothing but a line split and ``json.loads``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The loop every stdlib agent shares, by path: it runs in sandboxes (stdlib only).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "governor" / "agents"))
from stdio_peer import Peer, encode

SESSION = "stream-session"


def lines(n: int) -> list[bytes]:
    """The N notification lines (the last one is the final message)."""

    def note(update: dict[str, Any]) -> bytes:
        return encode(
            {"method": "session/update", "params": {"sessionId": SESSION, "update": update}}
        )

    def chunk(i: int) -> dict[str, Any]:
        return {
            "sessionUpdate": "agent_message_chunk",
            "messageId": f"m{i // 10}",
            "content": {"type": "text", "text": f"part {i} of the answer, "},
        }

    kinds: list[Callable[[int], dict[str, Any]]] = [
        chunk,
        lambda i: {
            "sessionUpdate": "agent_thought_chunk",
            "content": {"type": "text", "text": f"thinking about step {i}"},
        },
        lambda i: {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "stream-tool",
            "status": "in_progress",
            "content": [{"type": "content", "content": {"type": "text", "text": f"line {i}"}}],
        },
        lambda i: {
            "sessionUpdate": "plan",
            "entries": [
                {"content": "Read", "priority": "high", "status": "completed"},
                {"content": f"Step {i}", "priority": "medium", "status": "in_progress"},
            ],
        },
        lambda i: {"sessionUpdate": "usage_update", "used": i, "size": 200_000},
    ]
    out = [note(chunk(0))]
    out += [note(kinds[i % len(kinds)](i)) for i in range(1, n - 1)]
    out.append(
        note(
            {
                "sessionUpdate": "agent_message_chunk",
                "messageId": "final",
                "content": {"type": "text", "text": f"stream: {n} sent"},
            }
        )
    )
    return out


def main(argv: list[str]) -> int:
    if not argv or not argv[0].isdigit() or int(argv[0]) < 2:
        print("usage: stream_agent.py N [--now]   (N >= 2 notifications)", file=sys.stderr)
        return 2
    stream = lines(int(argv[0]))
    peer = Peer()
    if "--now" in argv[1:]:
        for start in range(0, len(stream), 512):
            peer.write(b"".join(stream[start : start + 512]), flush=False)
        peer.flush()
        return 0
    while (message := peer.receive()) is not None:
        method, rid = message.get("method"), message.get("id")
        if rid is None or method is None:
            continue
        if method == "initialize":
            result: dict[str, Any] = {"protocolVersion": 1, "authMethods": []}
        elif method == "session/new":
            result = {"sessionId": SESSION}
        elif method == "session/prompt":
            for start in range(0, len(stream), 512):
                peer.write(b"".join(stream[start : start + 512]), flush=False)
            result = {"stopReason": "end_turn"}
        else:
            peer.fail(rid, -32601, "no")
            continue
        peer.respond(rid, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
