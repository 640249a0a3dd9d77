"""A relay between the governor and an agent that writes down every line on the wire.

``python wiretap.py LOG -- AGENT ARGV...`` starts the agent, copies the governor's
stdin to it and its stdout back, and appends one JSON record per line to LOG:
``{"t": seconds, "to": "agent" | "governor", "msg": the JSON-RPC message}``, plus
``{"to": "agent", "closed": true}`` when the governor closes stdin and
``{"exit": code}`` when the agent ends. Some protocol facts show only on the wire
(whether the agent answered ``cancelled``, whether our answer left before stdin
closed), so a test reads them here. The agent's stderr passes straight through.

The relay writes LOG itself, so it runs without the agent sandbox (which would
hide LOG's folder); use it with agents that touch no files.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO


def read(log: Path) -> list[dict[str, Any]]:
    """The records a wiretap wrote (none if it never started)."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def main(argv: list[str]) -> int:
    log_path, sep, *agent = argv
    if sep != "--" or not agent:
        print("usage: wiretap.py LOG -- AGENT ARGV...", file=sys.stderr)
        return 2
    started = time.monotonic()
    lock = threading.Lock()
    log = open(log_path, "a", buffering=1)  # noqa: SIM115 - open for the relay's life

    def note(record: dict[str, Any]) -> None:
        with lock:
            log.write(json.dumps({"t": round(time.monotonic() - started, 3), **record}) + "\n")

    def parsed(line: bytes) -> Any:
        try:
            return json.loads(line)
        except ValueError:
            return line.decode("utf-8", "replace").rstrip("\n")

    child = subprocess.Popen(agent, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None

    def to_agent(stdin: BinaryIO) -> None:
        assert child.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            for line in stdin:
                note({"to": "agent", "msg": parsed(line)})
                child.stdin.write(line)
                child.stdin.flush()
        note({"to": "agent", "closed": True})
        with contextlib.suppress(BrokenPipeError):
            child.stdin.close()

    threading.Thread(target=to_agent, args=(sys.stdin.buffer,), daemon=True).start()
    for line in child.stdout:
        note({"to": "governor", "msg": parsed(line)})
        with contextlib.suppress(BrokenPipeError):
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
    code = child.wait()
    note({"exit": code})
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
