"""Finding what an unsandboxed agent left running.

A sandboxed agent dies with its PID namespace. An unsandboxed one (full-access,
``--no-sandbox-agent``) is killed as a process group, and a daemon that called
``setsid()`` leaves that group. It keeps its environment, though: the attempt
gives the agent a marker variable (`MARKER`) and, when the attempt ends, kills
every process of ours whose environment still holds this attempt's value. A
daemon that clears its environment escapes this too; only the sandbox is a
boundary.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Final

MARKER: Final = "ACP_GOVERNOR_ATTEMPT"


def marked(value: str) -> list[int]:
    """Pids of live processes (ours to read) whose environment has ``MARKER=value``."""
    needle = f"{MARKER}={value}".encode() + b"\0"
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read() + b"\0"
        except OSError:
            continue
        if b"\0" + needle in b"\0" + environ:
            found.append(int(entry))
    return found


def kill_marked(value: str) -> int:
    """SIGKILL every process marked with this attempt's value; how many were found."""
    pids = marked(value)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)
