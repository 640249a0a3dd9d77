"""An ACP agent that offers session modes, for the ``--mode`` tests: standard
library only, real stdio.

``--legacy``: its modes are the ``modes`` of ``session/new`` (set with
``session/set_mode``); otherwise a ``mode`` config option (set with
``session/set_config_option``). It offers ``default`` (asks), ``architect``
and ``bypassPermissions`` (acts alone), starts in ``default`` and ends its one
turn saying the mode it is in, so a test sees the switch from the agent's side.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

# The loop every stdlib agent shares, by path (as the other test agents load it).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "governor" / "agents"))
from stdio_peer import Peer

MODES = [
    ("default", "Default", "Asks before it edits or runs anything"),
    ("architect", "Architect", "Designs before it codes"),
    ("bypassPermissions", "Bypass Permissions", "Skips every permission prompt"),
]


def serve(legacy: bool) -> int:
    peer, mode, session = Peer(), "default", ""
    while (message := peer.receive()) is not None:
        method, mid = message.get("method"), message.get("id")
        params: dict[str, Any] = message.get("params") or {}
        if method == "initialize":
            info = {"name": "modes", "version": "1"}
            peer.respond(
                mid,
                {
                    "protocolVersion": 1,
                    "agentCapabilities": {},
                    "authMethods": [],
                    "agentInfo": info,
                },
            )
        elif method == "session/new":
            session = f"s-{uuid.uuid4().hex}"
            peer.respond(mid, {"sessionId": session, **state(mode, legacy)})
        elif method == "session/set_mode":
            mode = params["modeId"]
            peer.respond(mid, {})
        elif method == "session/set_config_option":
            mode = params["value"]
            peer.respond(mid, state(mode, legacy=False))
        elif method == "session/prompt":
            chunk = {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": f"in mode {mode}"},
            }
            peer.notify("session/update", {"sessionId": session, "update": chunk})
            peer.respond(mid, {"stopReason": "end_turn"})
        elif mid is not None and method is not None:
            peer.fail(mid, -32601, "method not found")
    return 0


def state(mode: str, legacy: bool) -> dict[str, Any]:
    """The modes part of ``session/new`` (or of a set_config_option answer)."""
    if legacy:
        available = [{"id": i, "name": n, "description": d} for i, n, d in MODES]
        return {"modes": {"currentModeId": mode, "availableModes": available}}
    choices = [{"value": i, "name": n, "description": d} for i, n, d in MODES]
    option = {
        "id": "mode",
        "name": "Mode",
        "category": "mode",
        "type": "select",
        "currentValue": mode,
        "options": choices,
    }
    return {"configOptions": [option]}


if __name__ == "__main__":
    sys.exit(serve("--legacy" in sys.argv[1:]))
