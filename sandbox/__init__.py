"""Bubblewrap: what a sandbox shows, planned as values, and the processes run in it.

The package is in rooms by kind, so that a reader knows from the path what a
file may touch:

- `governor.sandbox.plan`: pure. A `Profile` becomes bwrap's argv; the protected and
  hidden names; the seccomp filter; the egress plan. No I/O, no trio.
- `governor.sandbox.host`: probes of this machine: the survey of what a profile must
  hide or keep, host sockets, toolchains, the person's git, bwrap itself, the
  limits this kernel can enforce (rlimits, cgroups).
- `governor.sandbox.run`: processes on trio: spawn, launch, sessions, terminals, the
  runner, the agent's own sandbox, the placeholder ledger, the preflight (the
  runner's `run` is `governor.sandbox.run.runner.run`, not a name here: the
  subpackage ``run`` would hide it once imported).
- `governor.sandbox.net`: the egress proxy, its HTTP/1 reader, listening sockets made
  inside a sandbox's network namespace.
- `governor.sandbox.standalone`: scripts run by path, some as root, under ``-I -S``:
  standard library only, nothing of ours imported.

Names below are imported lazily: the command line's fast paths (``--help``,
``check``) must not pay for trio and the survey.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from governor.sandbox.host.bwrap import Bwrap, BwrapUnavailable, SandboxStartFailed
    from governor.sandbox.host.survey import survey
    from governor.sandbox.plan.bwrap_argv import render
    from governor.sandbox.plan.profile import (
        BwrapFeatures,
        HomeFolder,
        HostFacts,
        Profile,
        ProfileError,
    )
    from governor.sandbox.plan.protected import HIDDEN_PATTERNS, PROTECTED_NAMES
    from governor.sandbox.run.agent import agent_process, resolve_install
    from governor.sandbox.run.execution import Execution, ExitStatus
    from governor.sandbox.run.preflight import preflight
    from governor.sandbox.run.runner import DEFAULT_OUTPUT_LIMIT, Command, RunResult, start
    from governor.sandbox.run.session import SandboxSession, SessionEnded, SessionError
    from governor.sandbox.run.terminals import (
        TerminalOutput,
        Terminals,
        TerminalsClosed,
        UnknownTerminal,
    )

_LAZY: dict[str, str] = {
    "agent_process": "governor.sandbox.run.agent",
    "resolve_install": "governor.sandbox.run.agent",
    "Bwrap": "governor.sandbox.host.bwrap",
    "BwrapUnavailable": "governor.sandbox.host.bwrap",
    "SandboxStartFailed": "governor.sandbox.host.bwrap",
    "Execution": "governor.sandbox.run.execution",
    "ExitStatus": "governor.sandbox.run.execution",
    "preflight": "governor.sandbox.run.preflight",
    "BwrapFeatures": "governor.sandbox.plan.profile",
    "HomeFolder": "governor.sandbox.plan.profile",
    "HostFacts": "governor.sandbox.plan.profile",
    "Profile": "governor.sandbox.plan.profile",
    "ProfileError": "governor.sandbox.plan.profile",
    "render": "governor.sandbox.plan.bwrap_argv",
    "HIDDEN_PATTERNS": "governor.sandbox.plan.protected",
    "PROTECTED_NAMES": "governor.sandbox.plan.protected",
    "DEFAULT_OUTPUT_LIMIT": "governor.sandbox.run.runner",
    "Command": "governor.sandbox.run.runner",
    "RunResult": "governor.sandbox.run.runner",
    "start": "governor.sandbox.run.runner",
    "SandboxSession": "governor.sandbox.run.session",
    "SessionEnded": "governor.sandbox.run.session",
    "SessionError": "governor.sandbox.run.session",
    "survey": "governor.sandbox.host.survey",
    "TerminalOutput": "governor.sandbox.run.terminals",
    "Terminals": "governor.sandbox.run.terminals",
    "TerminalsClosed": "governor.sandbox.run.terminals",
    "UnknownTerminal": "governor.sandbox.run.terminals",
}

__all__ = [
    "DEFAULT_OUTPUT_LIMIT",
    "HIDDEN_PATTERNS",
    "PROTECTED_NAMES",
    "Bwrap",
    "BwrapFeatures",
    "BwrapUnavailable",
    "Command",
    "Execution",
    "ExitStatus",
    "HomeFolder",
    "HostFacts",
    "Profile",
    "ProfileError",
    "RunResult",
    "SandboxSession",
    "SandboxStartFailed",
    "SessionEnded",
    "SessionError",
    "TerminalOutput",
    "Terminals",
    "TerminalsClosed",
    "UnknownTerminal",
    "agent_process",
    "preflight",
    "render",
    "resolve_install",
    "start",
    "survey",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
