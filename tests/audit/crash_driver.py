"""A governor to kill: imports everything once, then forks a fresh governor per order.

Reads one JSON order per line on stdin (``{"dir": ..., "durability": ...}``) and
forks a child that runs governed attempts of the scripted agent back to back,
all into ``DIR/audit.jsonl``, until it is killed; the agent notes every answer it
receives in ``DIR/received.jsonl``. Prints the child's pid, one per line.
Forking from a process that has imported the governor (and run nothing) makes a
fresh governor in a millisecond instead of a second, so a test can kill fifty.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

import trio

from governor.attempt.lifecycle import run_attempt
from governor.job.spec import AttemptSpec
from governor.policies.policy import parse_policy

HERE = Path(__file__).parent
POLICY = parse_policy(
    'capability = "edit-workspace"\n[deny]\npaths = ["secret/**"]\n', "crash.toml"
)
OPTIONS = [
    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
]
STEPS: list[dict[str, Any]] = [
    {
        "repeat": 15,
        "steps": [
            {
                "request": "session/request_permission",
                "params": {
                    "sessionId": "{session}",
                    "toolCall": {
                        "toolCallId": "p{i}",
                        "title": "Write f{i}.txt",
                        "kind": "edit",
                        "rawInput": {"file_path": "{cwd}/f{i}.txt", "content": "x"},
                        "locations": [{"path": "{cwd}/f{i}.txt"}],
                    },
                    "options": OPTIONS,
                },
            },
            {
                "request": "fs/write_text_file",
                "params": {"sessionId": "{session}", "path": "{cwd}/f{i}.txt", "content": "x"},
            },
            {
                "request": "fs/read_text_file",
                "params": {"sessionId": "{session}", "path": "{cwd}/f{i}.txt"},
            },
            {
                "request": "fs/write_text_file",
                "params": {
                    "sessionId": "{session}",
                    "path": "{cwd}/secret/f{i}.txt",
                    "content": "x",
                },
            },
        ],
    },
    {"say": "done"},
]


async def attempts(order: dict[str, Any]) -> None:
    base = Path(order["dir"])
    ws = base / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "secret").mkdir(exist_ok=True)
    script = base / "script.json"
    script.write_text(json.dumps(STEPS))
    agent = [
        sys.executable,
        str(HERE / "scripted_agent.py"),
        "--script",
        str(script),
        "--received",
        str(base / "received.jsonl"),
    ]
    while True:
        await run_attempt(
            AttemptSpec(
                prompt="write files",
                argv=agent,
                workspace=ws,
                policy=POLICY,
                log=base / "audit.jsonl",
                durability=order["durability"],
                sandbox_agent=False,
                timeout=30,
            )
        )


def child(order: dict[str, Any]) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the governor reaps its own
    out = os.open(Path(order["dir"]) / "governor.out", os.O_WRONLY | os.O_CREAT, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    try:
        trio.run(attempts, order)
    except BaseException:
        traceback.print_exc()
    os._exit(1)


def main() -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # killed children are reaped by the kernel
    print("ready", flush=True)
    for line in sys.stdin:
        order = json.loads(line)
        pid = os.fork()
        if pid == 0:
            child(order)
        print(pid, flush=True)


if __name__ == "__main__":
    main()
