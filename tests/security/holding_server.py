"""An MCP server (stdlib only, stdio) whose one tool makes it hold processes
and memory, as a build or a language server started by a tool would:

- ``hold {processes, megabytes, sleep}``: starts ``processes`` children that
  sleep ``sleep`` seconds,
  and keeps ``megabytes`` MiB of its own memory written (resident), until its
  session ends; answers what it holds.
"""

from __future__ import annotations

import json
import subprocess
import sys

TOOLS = [{"name": "hold", "inputSchema": {"type": "object"}}]
kept: list[object] = []


def hold(processes: int, megabytes: int, sleep: str) -> str:
    started = 0
    for _ in range(processes):
        try:
            kept.append(subprocess.Popen(["sleep", sleep]))
            started += 1
        except OSError:
            break
    kept.append(b"m" * (megabytes << 20))  # written: resident, not only reserved
    return f"holding {started} processes and {megabytes} MiB"


def send(body: object) -> None:
    sys.stdout.write(json.dumps(body) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": ident, "result": {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "holding", "version": "1"}}})  # fmt: skip
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            args = message["params"].get("arguments") or {}
            text = hold(
                int(args.get("processes", 0)), int(args.get("megabytes", 0)), str(args.get("sleep", 300))
            )
            send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": text}]}})
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "not found"}})
    for child in kept:
        if isinstance(child, subprocess.Popen):
            child.kill()


if __name__ == "__main__":
    main()
