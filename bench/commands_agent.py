"""An agent for `bench/attempt_budget.py`: holds H sleeping children, then runs
N commands (``terminal/create`` of ``true``, its exit awaited, released) one
after another, and ends its turn with ``commands: N`` (the number that exited 0).

Run: ``python bench/commands_agent.py N H``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# The loop every stdlib agent shares, by path: it runs in sandboxes (stdlib only).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "governor" / "agents"))
from stdio_peer import Peer


def main(argv: list[str]) -> int:
    count, held = int(argv[0]), int(argv[1])
    peer = Peer()
    session, cwd = "s-1", "."
    while (message := peer.receive()) is not None:
        method, mid = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            peer.respond(mid, {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []})
        elif method == "session/new":
            cwd = params.get("cwd") or cwd
            peer.respond(mid, {"sessionId": session})
        elif method == "session/prompt":
            children = [subprocess.Popen(["sleep", "600"]) for _ in range(held)]
            ok = 0
            for _ in range(count):
                made = peer.request("terminal/create", {
                    "sessionId": session, "command": "true", "args": [], "cwd": cwd})  # fmt: skip
                terminal = (made.get("result") or {}).get("terminalId")
                if terminal is None:
                    continue
                ended = peer.request("terminal/wait_for_exit", {"sessionId": session, "terminalId": terminal})
                ok += (ended.get("result") or {}).get("exitCode") == 0
                peer.request("terminal/release", {"sessionId": session, "terminalId": terminal})
            for child in children:
                child.kill()
                child.wait()
            peer.notify("session/update", {"sessionId": session, "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": f"commands: {ok}"}}})  # fmt: skip
            peer.respond(mid, {"stopReason": "end_turn"})
        elif mid is not None and method is not None:
            peer.fail(mid, -32601, "method not found")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
