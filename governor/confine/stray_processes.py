"""Finding what an unsandboxed agent left running, past its watchdog.

A sandboxed agent dies with its PID namespace. An unsandboxed one (full-access,
``--no-sandbox-agent``) runs under a watchdog (`governor.sandbox.standalone.watchdog`): a child
subreaper that SIGKILLs the agent and every descendant, ``setsid()`` daemons
included, when the agent exits, when the attempt ends and when the governor
dies. This sweep is the second net, for what is no longer in the watchdog's
tree: everything the agent started, once the agent has killed (or stopped) the
watchdog itself (same user: full-access is no boundary), and a process some
already-running server started on the agent's behalf with its environment.
Those keep their environment, often: the attempt gives the agent a marker
variable (`MARKER`) and, when the attempt ends, kills every process of ours
whose environment still holds this attempt's value. A process that both left
the tree and cleared its environment escapes; only the sandbox is a boundary.
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
