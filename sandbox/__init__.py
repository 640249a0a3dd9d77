"""Bubblewrap: what a sandbox shows, planned as values, and the processes run in it.

The package is in rooms by kind, so that a reader knows from the path what a
file may touch:

- `sandbox.plan`: pure. A `Profile` becomes bwrap's argv; the protected and
  hidden names; the seccomp filter; the egress plan. No I/O, no trio.
- `sandbox.host`: probes of this machine: the survey of what a profile must
  hide or keep, host sockets, toolchains, the person's git, bwrap itself, the
  limits this kernel can enforce (rlimits, cgroups).
- `sandbox.run`: processes on trio: spawn, launch, sessions, terminals, the
  runner, the agent's own sandbox, the placeholder ledger, the preflight.
- `sandbox.net`: the egress proxy, its HTTP/1 reader, listening sockets made
  inside a sandbox's network namespace.
- `sandbox.standalone`: scripts run by path, some as root, under ``-I -S``:
  standard library only, nothing of ours imported.

Names below are imported lazily: the command line's fast paths (``--help``,
``check``) must not pay for trio and the survey.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.host.bwrap import Bwrap, BwrapUnavailable, SandboxStartFailed
    from sandbox.host.survey import survey
    from sandbox.plan.profile import (
        BwrapFeatures,
        HomeFolder,
        HostFacts,
        Profile,
        ProfileError,
        render,
    )
    from sandbox.plan.protected import HIDDEN_PATTERNS, PROTECTED_NAMES
    from sandbox.run.agent import agent_process, resolve_install
    from sandbox.run.execution import Execution, ExitStatus
    from sandbox.run.preflight import preflight
    from sandbox.run.runner import DEFAULT_OUTPUT_LIMIT, Command, RunResult, run, start
    from sandbox.run.session import SandboxSession, SessionEnded, SessionError
    from sandbox.run.terminals import TerminalOutput, Terminals, TerminalsClosed, UnknownTerminal

_LAZY: dict[str, str] = {
    "agent_process": "sandbox.run.agent",
    "resolve_install": "sandbox.run.agent",
    "Bwrap": "sandbox.host.bwrap",
    "BwrapUnavailable": "sandbox.host.bwrap",
    "SandboxStartFailed": "sandbox.host.bwrap",
    "Execution": "sandbox.run.execution",
    "ExitStatus": "sandbox.run.execution",
    "preflight": "sandbox.run.preflight",
    "BwrapFeatures": "sandbox.plan.profile",
    "HomeFolder": "sandbox.plan.profile",
    "HostFacts": "sandbox.plan.profile",
    "Profile": "sandbox.plan.profile",
    "ProfileError": "sandbox.plan.profile",
    "render": "sandbox.plan.profile",
    "HIDDEN_PATTERNS": "sandbox.plan.protected",
    "PROTECTED_NAMES": "sandbox.plan.protected",
    "DEFAULT_OUTPUT_LIMIT": "sandbox.run.runner",
    "Command": "sandbox.run.runner",
    "RunResult": "sandbox.run.runner",
    "run": "sandbox.run.runner",
    "start": "sandbox.run.runner",
    "SandboxSession": "sandbox.run.session",
    "SessionEnded": "sandbox.run.session",
    "SessionError": "sandbox.run.session",
    "survey": "sandbox.host.survey",
    "TerminalOutput": "sandbox.run.terminals",
    "Terminals": "sandbox.run.terminals",
    "TerminalsClosed": "sandbox.run.terminals",
    "UnknownTerminal": "sandbox.run.terminals",
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
    "run",
    "start",
    "survey",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
