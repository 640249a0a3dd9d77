"""Bubblewrap: profiles rendered to bwrap argv (pure) and a trio runner."""

from sandbox.agent import agent_process, resolve_install
from sandbox.bwrap import Bwrap, BwrapUnavailable
from sandbox.execution import Execution, ExitStatus
from sandbox.preflight import preflight
from sandbox.profile import BwrapFeatures, HomeFolder, HostFacts, Profile, ProfileError, render
from sandbox.protected import HIDDEN_PATTERNS, PROTECTED_NAMES
from sandbox.runner import DEFAULT_OUTPUT_LIMIT, Command, RunResult, run, start
from sandbox.session import SandboxSession, SessionEnded, SessionError
from sandbox.survey import survey
from sandbox.terminals import TerminalOutput, Terminals, TerminalsClosed, UnknownTerminal

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
