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


Action = ReadFile | WriteFile | RunCommand | ToolPermission
