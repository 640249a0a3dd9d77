"""The governor's use of `sandbox/`: preflight, the agent's wrapper, the terminals.

(Interim: wired to the sandbox package as it lands.)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

import trio

from governor.presets import Preset
from policies.policy import Policy


class SandboxUnavailable(Exception):
    """bwrap cannot work here; the message says what to install or enable."""


def preflight(policy: Policy, *, sandbox_agent: bool) -> None:
    return None


def agent_command(
    argv: Sequence[str],
    policy: Policy,
    preset: Preset | None,
    env: Mapping[str, str],
    *,
    sandbox: bool,
) -> tuple[list[str], list[int]]:
    return list(argv), []


def close_fds(fds: Sequence[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def terminals(policy: Policy, nursery: trio.Nursery) -> Any:
    return None


async def close_terminals(terminals: Any) -> None:
    return None


def command_windows(terminals: Any) -> list[tuple[int, int | None]]:
    return []
