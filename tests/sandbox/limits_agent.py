"""An ACP agent that, asked for anything, does one bad thing (standard library
only, real stdio): ``spin`` burns CPU, ``memory`` allocates 3 GiB, ``fork``
forks until it is refused and then keeps trying until ``stop`` appears in its
working directory; ``fine`` answers at once.

    python limits_agent.py spin|memory|fork|fine
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

# The loop every stdlib agent shares, by path: it runs in sandboxes (stdlib only).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "governor" / "agents"))
from stdio_peer import Peer


def bad_thing(kind: str, cwd: str) -> None:
    if kind == "spin":
        while True:
            pass
    if kind == "memory":
        block = bytearray(3 << 30)
        print(len(block), file=sys.stderr)
    if kind == "fork":
        children = 0
        refused = 0
        last = ""
        while not os.path.exists(os.path.join(cwd, "stop")):
            try:
                pid = os.fork()
            except OSError as exc:
                if not refused:  # the test's sign that the bomb is at its limit
                    with open(os.path.join(cwd, "at-limit"), "w") as sign:
                        sign.write(str(children))
                refused += 1
                last = str(exc)
                time.sleep(0.01)
                continue
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            children += 1
        print(f"forked {children}; fork failed {refused} times: {last}", file=sys.stderr)
        sys.exit(1)


def main() -> None:
    kind = sys.argv[1]
    cwd = "."
    peer = Peer()
    while (message := peer.receive()) is not None:
        method, ident = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            peer.respond(ident, {"protocolVersion": 1, "agentCapabilities": {}})
        elif method == "session/new":
            cwd = params.get("cwd", ".")
            peer.respond(ident, {"sessionId": "s1"})
        elif method == "session/prompt":
            bad_thing(kind, cwd)
            peer.respond(ident, {"stopReason": "end_turn"})
        elif ident is not None:
            peer.respond(ident, None)


if __name__ == "__main__":
    main()
