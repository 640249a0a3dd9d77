"""What an agent can ask the governor for, as plain values the engine decides."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ReadFile:
    """A governed read (``fs/read_text_file``): an absolute, resolved path."""

    path: str


@dataclass(frozen=True, slots=True)
class WriteFile:
    """A governed write (``fs/write_text_file``): an absolute, resolved path."""

    path: str


@dataclass(frozen=True, slots=True)
class RunCommand:
    """A command (``terminal/create``): a shell line, or an argv run without a shell."""

    command: str | tuple[str, ...]
    cwd: str | None = None
    """Where it runs; the workspace when None."""
    env: tuple[str, ...] = ()
    """Names of the variables the agent sets (never their values)."""


@dataclass(frozen=True, slots=True, eq=False)
class ToolPermission:
    """A ``session/request_permission``: the tool call's kind, title, raw input
    and the locations it names."""

    kind: str | None
    title: str = ""
    raw_input: Mapping[str, Any] | None = field(default=None)
    locations: tuple[str, ...] = ()
    cwd: str | None = None
    tool_name: str | None = None
    """The tool's own name where the agent gives one besides its title (Qwen
    Code's ``_meta.toolName``, ``mcp__SERVER__TOOL`` for an MCP tool): like the
    title, the agent's word."""


@dataclass(frozen=True, slots=True)
class Connect:
    """A connection through the egress proxy (`governor.policies.network`): host and port,
    and for plain HTTP the method and path.

    ``origin`` is who asks: ``agent`` (the agent's own sandbox) or ``command``.
    ``addresses`` are what the proxy resolved the host to (asked again with them
    once the name was allowed); ``problem`` is a request the proxy refuses
    whatever the rules (a Host header that disagrees with the target, ...)."""

    host: str
    port: int
    method: str | None = None
    path: str | None = None
    origin: str = "command"
    addresses: tuple[str, ...] = ()
    problem: str | None = None


Action = ReadFile | WriteFile | RunCommand | ToolPermission | Connect
