"""An ACP agent that can load its session (standard library only, real stdio), for
test_outside_attack3: it keeps every prompt it is given, one JSON line each, in
``told.txt`` in its working directory, then asks permission to edit ``x.txt``
and stops. What a resumed attempt tells it of the person's decision is there to read.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

SESSION = "told-session-1"


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> int:
    cwd = os.getcwd()
    asked = 0
    for line in sys.stdin:
        message = json.loads(line)
        method, mid, params = message.get("method"), message.get("id"), message.get("params") or {}
        if method is None:
            continue  # an answer to our permission request: the prompt ends below
        if method == "initialize":
            result: Any = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}
        elif method in ("session/new", "session/load"):
            cwd = params.get("cwd") or cwd
            result = {"sessionId": SESSION} if method == "session/new" else None
        elif method == "session/prompt":
            with open(os.path.join(cwd, "told.txt"), "a", encoding="utf-8") as f:
                f.write(json.dumps(params.get("prompt")) + "\n")
            asked += 1
            path = os.path.join(cwd, "x.txt")
            call = {"toolCallId": f"edit-{asked}", "title": "Edit x.txt", "kind": "edit",
                    "status": "pending", "locations": [{"path": path}]}  # fmt: skip
            options = [{"optionId": "once", "name": "Allow", "kind": "allow_once"},
                       {"optionId": "no", "name": "Reject", "kind": "reject_once"}]  # fmt: skip
            send({"jsonrpc": "2.0", "id": f"p{asked}", "method": "session/request_permission",
                  "params": {"sessionId": SESSION, "toolCall": call, "options": options}})  # fmt: skip
            for answer in sys.stdin:
                if json.loads(answer).get("id") == f"p{asked}":
                    break
            result = {"stopReason": "end_turn"}
        elif mid is None:
            continue  # session/cancel and other notifications
        else:
            send(
                {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"no {method}"}}
            )
            continue
        send({"jsonrpc": "2.0", "id": mid, "result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
