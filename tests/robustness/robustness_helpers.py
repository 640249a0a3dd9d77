"""Shared pieces of the robustness tests: agent scripts, specs, and the /proc scan
that proves no process of an attempt is left running."""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import trio

from governor.job.spec import AttemptSpec
from governor.policies.policy import parse_policy

HERE = Path(__file__).resolve().parent
FAULT_AGENT = HERE / "fault_agent.py"
EDIT = parse_policy('capability = "edit-workspace"', "robustness")

GUARD = 60.0
"""Only a guard against a hang turning into a stuck CI job; never an assertion on speed."""


def new_marker() -> str:
    return f"govtest-{uuid.uuid4().hex}"


def marked_processes(marker: str) -> list[tuple[int, str]]:
    """(pid, cmdline) of every live (not zombie) process whose argv or environment
    holds `marker`."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
            if state in (b"Z", b"X"):
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            environ = b""
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    environ = f.read()
            except OSError:
                pass
        except (OSError, IndexError):
            continue
        if needle in cmdline or needle in environ:
            found.append((int(entry), cmdline.replace(b"\0", b" ").decode(errors="replace")))
    return found


async def none_left(marker: str, within: float = 10.0) -> list[tuple[int, str]]:
    """The marked processes still alive after waiting up to `within` seconds for
    them to go (a kill is delivered at once but a process takes a moment to die)."""
    with trio.move_on_after(within):
        while marked_processes(marker):
            await trio.sleep(0.05)
    return marked_processes(marker)


def kill_marked(marker: str) -> None:
    """Clean up after a failed test, so that one leak does not spill into the next."""
    import signal

    for pid, _ in marked_processes(marker):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def fault_spec(
    tmp_path: Path, mode: str, marker: str, arg: str | None = None, **kw: Any
) -> AttemptSpec:
    """A spec running the fault agent in `mode` on a fresh workspace (side file inside it)."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    argv = [sys.executable, str(FAULT_AGENT), mode, str(ws / "side.jsonl"), marker]
    if arg is not None:
        argv.append(arg)
    base: dict[str, Any] = {
        "prompt": "misbehave",
        "argv": argv,
        "workspace": ws,
        "policy": EDIT,
        "log": tmp_path / "audit.jsonl",
        "timeout": 30,
    }
    base.update(kw)
    return AttemptSpec(**base)


def rss_mb() -> float:
    """This process's resident set size now, in MB (VmRSS)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def sample_rss(
    into: list[tuple[Any, float]], progress: Any = lambda: 0, interval: float = 0.02
) -> None:
    """Append ``(progress(), rss_mb())`` every `interval` seconds until cancelled (start it
    in the test's nursery, cancel it when the run is over)."""
    while True:
        into.append((progress(), rss_mb()))
        await trio.sleep(interval)
