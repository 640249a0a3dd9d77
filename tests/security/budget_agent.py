"""An ACP agent (stdlib only, real stdio) whose work is spread over every kind
of sandbox an attempt has, each part well under the per-sandbox limits:

    python budget_agent.py WAIT PROCESSES MEGABYTES [SLEEP]

On ``session/prompt`` it holds PROCESSES sleeping children and MEGABYTES MiB
of written memory in three places at once: in its own sandbox, in a command
(``terminal/create``: the session's sandbox), and in the MCP server ``hold``
(its ``hold`` tool, through the shim of the entry it was handed: the server's
sandbox). It keeps all of it WAIT seconds, writes ``answers.json`` (what each
part said) in its working directory, lets everything go and ends its turn.
An agent stopped before then never writes it. Every child sleeps SLEEP
seconds (300: a test passes an odd number to find them on the host).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "governor" / "agents"))
from stdio_peer import Peer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mcp_agent import INIT, Shim, said


def hold_here(processes: int, megabytes: int, sleep: str) -> tuple[list[subprocess.Popen[bytes]], bytes]:
    children = []
    for _ in range(processes):
        try:
            children.append(subprocess.Popen(["sleep", sleep]))
        except OSError:
            break
    return children, b"a" * (megabytes << 20)


def main(argv: list[str]) -> int:
    wait, processes, megabytes = float(argv[0]), int(argv[1]), int(argv[2])
    sleep = argv[3] if len(argv) > 3 else "300"
    peer = Peer()
    session, entries, cwd = "s-1", {}, "."
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
            cwd = params.get("cwd") or cwd
            peer.send({"id": mid, "result": {"sessionId": session}})
        elif method == "session/prompt":
            answers: dict[str, Any] = {}
            children, memory = hold_here(processes, megabytes, sleep)
            answers["agent"] = f"holding {len(children)} processes and {len(memory) >> 20} MiB"
            line = (
                f"for i in $(seq {processes}); do sleep {sleep} & done; "
                f"exec python3 -c 'import time; m = b\"c\" * ({megabytes} << 20); time.sleep({sleep})'"
            )
            created = peer.request("terminal/create", {
                "sessionId": session, "command": "sh", "args": ["-c", line], "cwd": cwd})  # fmt: skip
            terminal = (created.get("result") or {}).get("terminalId")
            answers["command"] = terminal or created.get("error")
            shim = Shim(entries["hold"])
            shim.ask("initialize", INIT)
            shim.send({"method": "notifications/initialized"})
            held = shim.ask("tools/call", {"name": "hold", "arguments": {
                "processes": processes, "megabytes": megabytes, "sleep": sleep}})  # fmt: skip
            answers["server"] = said(held)
            time.sleep(wait)
            Path(cwd, "answers.json").write_text(json.dumps(answers))
            shim.close()
            if terminal is not None:
                peer.request("terminal/kill", {"sessionId": session, "terminalId": terminal})
                peer.request("terminal/release", {"sessionId": session, "terminalId": terminal})
            for child in children:
                child.kill()
                child.wait()
            del memory
            peer.send({"id": mid, "result": {"stopReason": "end_turn"}})
        elif mid is not None and method is not None:
            peer.fail(mid, -32601, "method not found")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
