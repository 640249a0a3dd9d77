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
| ``written`` | a governed ``fs/write_text_file`` left the file exactly so (size, mtime, ctime, inode and content: `governor.confine.workspace.Seen`) | nothing the agent can do: a later write moves the ctime, or in the same tick the content |
| ``named`` | an allowed permission's tool call named the path (its locations, or a file its command redirects to) | a tool call that names a path it does not write, while something else writes it |
| ``command`` | its time (its ctime, which the agent cannot set) falls in a governed terminal's run | anything else writing during a command |
| ``window`` | its time falls between an allowed permission's answer and its tool call's end (its ``completed`` or ``failed`` update, else the next permission, else the turn's end) | two tool calls at once: a change made by one inside the other's window is credited to it; a write without asking while an allowed call runs |
| ``deleted`` | a deletion (it carries no time) while a governed command ran or a permission was allowed | any deletion in such an attempt |
| ``program`` | the agent is a plain program (``--kind command``, which asks nothing: its changes are its work) and the change's time falls in its run, or it is a deletion | anything else writing in the roots while it runs |

Pure: the gate collects the evidence (`Carried`: its writes, commands and
`Allowance`s), the attempt the snapshots.
"""

from __future__ import annotations

import bisect
import itertools
import time
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from governor.confine.workspace import Change, Seen, Snapshot, differs
from governor.policies import by as who


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
    """An attempt's allowed permissions, kept small: an attempt of 60,000 of them
    must not hold 60,000 objects. What the rules need is kept, no more: the
    first allowance naming each path (`named`), and the windows in order, as
    arrays (`window`). An attempt's allowances then cost a few dozen bytes each
    (three integers and the tool call's id), and the named paths one entry per
    path."""

    __slots__ = ("_calls", "_ends", "_lag", "_named", "_open", "_reach", "_seqs", "_starts")

    def __init__(self, given: Iterable[Allowance] = (), *, lag_ns: int = 0) -> None:
        self._lag = lag_ns
        """How much earlier a window is taken to start (`window`): an attempt's
        are made with `CTIME_LAG_NS`; the times a test states, with none."""
        self._named: dict[str, tuple[str, int | None]] = {}
        self._starts = array("q")
        self._ends = array("q")  # OPEN while its tool call runs
        self._seqs = array("q")  # NO_SEQ for None
        self._calls: list[str] = []
        self._open: dict[str, int] = {}  # tool call -> index of its open window
        self._reach: array[int] | None = None  # the ends' running maximum, made when asked
        for a in given:  # as a test states them
            self.allow(a.tool_call, a.seq, a.paths, now=a.start_ns)
            if a.end_ns is not None:
                self.end(a.tool_call, now=a.end_ns)

    def __len__(self) -> int:
        return len(self._starts)

    def allow(
        self, tool_call: str, seq: int | None, paths: frozenset[str], *, now: int | None = None
    ) -> None:
        """A permission was allowed just now: its window opens."""
        for path in paths:
            self._named.setdefault(path, (tool_call, seq))
        self._open[tool_call] = len(self._starts)
        self._starts.append(time.time_ns() if now is None else now)
        self._ends.append(OPEN)
        self._seqs.append(NO_SEQ if seq is None else seq)
        self._calls.append(tool_call)
        self._reach = None

    def end(self, tool_call: str | None = None, *, now: int | None = None) -> None:
        """`tool_call` ended (None: every open window ends, at the next permission)."""
        if not self._open:
            return
        now = time.time_ns() if now is None else now
        if tool_call is None:
            for index in self._open.values():
                self._ends[index] = now
            self._open.clear()
        elif tool_call in self._open:
            self._ends[self._open.pop(tool_call)] = now
        self._reach = None

    def naming(self, path: str) -> Cause | None:
        """The first allowance whose tool call named ``path``."""
        found = self._named.get(path)
        return None if found is None else Cause("named", found[0], found[1])

    def window(self, t: int, ended_ns: int) -> Cause | None:
        """The first allowance whose window holds ``t`` (open ones end at ``ended_ns``).

        ``t`` is a ctime, stamped by the kernel's coarse clock, which lags the
        clock a window's start is read from by up to a tick: a change made just
        after an allowance may carry a ctime just before it, so a window is
        taken to start `CTIME_LAG_NS` earlier (``lag_ns``; a change that early is
        the agent's work on the call it was just allowed, not one done without
        asking)."""
        starts, ends = self._starts, self._ends
        if self._reach is None:
            self._reach = array("q", itertools.accumulate(ends, max))
        reach = self._reach
        found = None
        # Windows start in order; only those started by t can hold it, and going
        # back, none can once the running maximum of their ends falls before t
        # (an open window's end counts as OPEN, past any time).
        i = bisect.bisect_right(starts, t + self._lag) - 1
        while i >= 0 and reach[i] >= t:
            end = ends[i] if ends[i] != OPEN else ended_ns
            if end >= t:
                found = i
            i -= 1
        if found is None:
            return None
        seq = self._seqs[found]
        return Cause("window", self._calls[found], None if seq == NO_SEQ else seq)


CTIME_LAG_NS: Final = 10_000_000
"""How far a ctime may lag the clock a window starts by: one tick of the
kernel's coarse clock at HZ=100 (4 ms at the usual 250)."""
OPEN: Final = 2**63 - 1
NO_SEQ: Final = -1


@dataclass(slots=True)
class Carried:
    """What the gate carried out for the agent, as evidence that a change or a
    reported tool call was governed. The gate's handlers add to it as they act
    and nothing else writes it; it travels in the attempt's `Ending`, so the
    attempt reads it there rather than from the gate."""

    written: dict[str, Seen] = field(default_factory=dict)
    """Paths the governor wrote, as a snapshot sees them right after the write
    (with the digest of what was written: a rewrite in the same tick differs)."""
    read_paths: set[str] = field(default_factory=set)
    """Paths read through the governor (as the agent named them, normalized)."""
    terminals: set[str] = field(default_factory=set)
    """The ids of the terminals the governor started."""
    allowances: Allowances = field(default_factory=lambda: Allowances(lag_ns=CTIME_LAG_NS))
    """Every allowed permission, for what the agent then did itself."""


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

    written: Mapping[str, Seen]
    """Paths the gate wrote, as a snapshot sees them right after the write."""
    current: Snapshot
    commands: Sequence[tuple[int, int]] = ()
    """(start, end) of each governed terminal's run."""
    allowed: Allowances = field(default_factory=Allowances)
    ended_ns: int = 0
    """The turn's end, closing the windows still open."""
    program: tuple[int, int] | None = None
    """(start, end) of a plain program's run (``--kind command``): the agent itself."""


def _written(change: Change, e: Evidence) -> Cause | None:
    left = e.written.get(change.path)
    now = e.current.files.get(change.path)
    if change.how != "deleted" and left is not None and now is not None and not differs(left, now):
        return Cause("written")
    return None


def _named(change: Change, e: Evidence) -> Cause | None:
    return e.allowed.naming(change.path)


def _command(change: Change, e: Evidence) -> Cause | None:
    t = change.time_ns
    if t is not None and any(a <= t <= b for a, b in e.commands):
        return Cause("command")
    return None


def _window(change: Change, e: Evidence) -> Cause | None:
    t = change.time_ns
    return None if t is None else e.allowed.window(t, e.ended_ns)


def _deleted(change: Change, e: Evidence) -> Cause | None:
    if change.how == "deleted" and (e.commands or len(e.allowed)):
        return Cause("deleted")
    return None


def _program(change: Change, e: Evidence) -> Cause | None:
    if e.program is None:
        return None
    t = change.time_ns
    if change.how == "deleted" or (t is not None and e.program[0] <= t <= e.program[1]):
        return Cause("program")
    return None


RULES: Final[tuple[tuple[str, Callable[[Change, Evidence], Cause | None]], ...]] = (
    ("written", _written),
    ("named", _named),
    ("command", _command),
    ("window", _window),
    ("deleted", _deleted),
    ("program", _program),
)
"""In order; the first that holds explains the change (see the module's table)."""


def explain(change: Change, evidence: Evidence) -> Cause | None:
    """What explains `change`, or None: it was done without asking."""
    for _, rule in RULES:
        cause = rule(change, evidence)
        if cause is not None:
            return cause
    return None


def change_record(change: Change, cause: Cause | None) -> dict[str, Any]:
    """The record of a change only the agent itself explains (`cause` names the
    permission it did it under: kind ``changed``, verdict ``reported``, by
    ``agent``) or nothing explains (None: kind and verdict ``unasked``, by
    ``snapshot``, which found it): the kind and the fields `AuditLog.record`
    takes. The verdict is the tally's word for the record, so that every view of
    the log says what the tally counts."""
    subject = {"path": change.path, "change": change.how}
    if cause is None:
        reason = (
            f"{change.path} was {change.how} in the roots and no governed write, command "
            "or allowed permission explains it"
        )
        return {"kind": "unasked", "subject": subject, "verdict": "unasked",
                "by": who.SNAPSHOT, "reason": reason, "explained_by": None}  # fmt: skip
    reason = (
        f"{change.path} was {change.how} by the agent itself, under the permission allowed "
        f"for tool call {cause.tool_call}"
        if cause.rule != "program"
        else f"{change.path} was {change.how} by the plain program the attempt ran: its work"
    )
    return {"kind": "changed", "subject": subject, "verdict": "reported", "by": who.AGENT,
            "reason": reason, "explained_by": cause.to_json()}  # fmt: skip
