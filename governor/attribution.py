"""What explains each change in the workspace: the rule as a table, in one place.

At the end of an attempt the workspace's snapshots before and after give the
files created, changed and deleted in the roots. Agents that run their own
tools (claude-agent-acp, Copilot, Codex, Gemini) ask permission and then do the
work themselves, so a change may be explained by an *allowed permission* as
well as by a governed write or command. Each change is explained by the first
rule of `RULES` that holds, and names what explains it (`Cause`: the rule, the
tool call, the seq of the decision record); a change no rule explains was done
without asking.

| rule | explains a change when | can be fooled by |
|---|---|---|
| ``written`` | a governed ``fs/write_text_file`` left the file exactly so (size, mtime) | a later write that keeps both |
| ``named`` | an allowed permission's tool call named the path (its locations, or a file its command redirects to) | a tool call that names a path it does not write, while something else writes it |
| ``command`` | its time falls in a governed terminal's run | anything else writing during a command |
| ``window`` | its time falls between an allowed permission's answer and its tool call's end (its ``completed`` or ``failed`` update, else the next permission, else the turn's end) | two tool calls at once: a change made by one inside the other's window is credited to it; a write without asking while an allowed call runs |
| ``deleted`` | a deletion (it carries no time) while a governed command ran or a permission was allowed | any deletion in such an attempt |

Pure: the gate collects the evidence (`Allowance`s), the attempt the snapshots.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from governor.workspace import Change, Snapshot


@dataclass(slots=True)
class Allowance:
    """An allowed permission: its tool call, the seq of its decision record, the
    paths it named (absolute, normalized), and its window in ``time.time_ns``."""

    tool_call: str
    seq: int | None
    paths: frozenset[str]
    start_ns: int
    end_ns: int | None = None
    """When its tool call ended (None while it runs: the turn's end closes it)."""


class Allowances:
    """An attempt's allowed permissions, in order, and the windows still open."""

    __slots__ = ("_open", "all")

    def __init__(self) -> None:
        self.all: list[Allowance] = []
        self._open: dict[str, Allowance] = {}

    def allow(self, tool_call: str, seq: int | None, paths: frozenset[str]) -> None:
        """A permission was allowed just now: its window opens."""
        allowance = Allowance(tool_call, seq, paths, time.time_ns())
        self.all.append(allowance)
        self._open[tool_call] = allowance

    def end(self, tool_call: str | None = None) -> None:
        """`tool_call` ended (None: every open window ends, at the next permission)."""
        if not self._open:
            return
        now = time.time_ns()
        if tool_call is None:
            for a in self._open.values():
                a.end_ns = now
            self._open.clear()
        elif tool_call in self._open:
            self._open.pop(tool_call).end_ns = now


@dataclass(frozen=True, slots=True)
class Cause:
    """What explains a change: the rule, and the tool call and decision behind it."""

    rule: str
    tool_call: str | None = None
    seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The cause as a record's ``explained_by``."""
        out: dict[str, Any] = {"rule": self.rule}
        if self.tool_call is not None:
            out["tool_call"] = self.tool_call
        if self.seq is not None:
            out["seq"] = self.seq
        return out


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the attempt knows at its end."""

    written: Mapping[str, tuple[int, int]]
    """Paths the gate wrote, with (size, mtime_ns) right after the write."""
    current: Snapshot
    commands: Sequence[tuple[int, int]] = ()
    """(start, end) of each governed terminal's run."""
    allowed: Sequence[Allowance] = field(default_factory=list)
    ended_ns: int = 0
    """The turn's end, closing the windows still open."""


def _written(change: Change, e: Evidence) -> Cause | None:
    left = e.written.get(change.path)
    if change.how != "deleted" and left is not None and left == e.current.files.get(change.path):
        return Cause("written")
    return None


def _named(change: Change, e: Evidence) -> Cause | None:
    for a in e.allowed:
        if change.path in a.paths:
            return Cause("named", a.tool_call, a.seq)
    return None


def _command(change: Change, e: Evidence) -> Cause | None:
    t = change.mtime_ns
    if t is not None and any(a <= t <= b for a, b in e.commands):
        return Cause("command")
    return None


def _window(change: Change, e: Evidence) -> Cause | None:
    t = change.mtime_ns
    if t is None:
        return None
    for a in e.allowed:
        if a.start_ns <= t <= (a.end_ns if a.end_ns is not None else e.ended_ns):
            return Cause("window", a.tool_call, a.seq)
    return None


def _deleted(change: Change, e: Evidence) -> Cause | None:
    if change.how == "deleted" and (e.commands or e.allowed):
        return Cause("deleted")
    return None


RULES: Final[tuple[tuple[str, Callable[[Change, Evidence], Cause | None]], ...]] = (
    ("written", _written),
    ("named", _named),
    ("command", _command),
    ("window", _window),
    ("deleted", _deleted),
)
"""In order; the first that holds explains the change (see the module's table)."""


def explain(change: Change, evidence: Evidence) -> Cause | None:
    """What explains `change`, or None: it was done without asking."""
    for _, rule in RULES:
        cause = rule(change, evidence)
        if cause is not None:
            return cause
    return None
