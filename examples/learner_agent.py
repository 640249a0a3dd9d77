"""A stdlib ACP agent for examples/tries.py: it learns from the checks' digest.

Its first fix of ``calc.py`` is wrong; told the failed checks' facts (the
prompt holds the digest of `governor.digest`, with the assertion that failed),
it writes the right one. It asks permission before each write and then writes
the file itself, as agents with their own tools do.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "governor" / "agents"))
from stdio_peer import Peer

WRONG = "def add(a, b):\n    return a * b\n"
RIGHT = "def add(a, b):\n    return a + b\n"
OPTIONS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]


def main() -> int:
    peer, session, cwd = Peer(), "s-1", Path(os.getcwd())
    while (message := peer.receive()) is not None:
        method, mid, params = message.get("method"), message.get("id"), message.get("params") or {}
        if method == "initialize":
            peer.respond(mid, {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []})
        elif method == "session/new":
            cwd = Path(params.get("cwd") or cwd)
            peer.respond(mid, {"sessionId": session})
        elif method == "session/prompt":
            prompt = "".join(b.get("text", "") for b in params.get("prompt", []))
            told = "failed_checks" in prompt and "AssertionError" in prompt
            target = cwd / "calc.py"
            call = {"toolCallId": "w1", "title": "Write calc.py", "kind": "edit",
                    "status": "pending", "locations": [{"path": str(target)}]}  # fmt: skip
            answer = peer.request(
                "session/request_permission",
                {"sessionId": session, "toolCall": call, "options": OPTIONS},
            ).get("result") or {}
            if answer.get("outcome", {}).get("optionId") == "allow":
                target.write_text(RIGHT if told else WRONG)
            said = "fixed add, from the checks' digest" if told else "fixed add"
            update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": said}}
            peer.notify("session/update", {"sessionId": session, "update": update})
            peer.respond(mid, {"stopReason": "end_turn"})
        elif mid is not None and method is not None:
            peer.fail(mid, -32601, "method not found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
