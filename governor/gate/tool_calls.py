"""What the agent reports about its tool calls, and which of them nothing governed explains.

Agents announce a tool call (``tool_call``), update it (``tool_call_update``) and
ask about it (``session/request_permission``); each mention may carry a part of
its state. `ToolCalls` keeps one `ToolCallState` per id, upserted from every
mention, and says when a completed call is *explained*: it came through the
gate itself (a permission request), it ran in a governed terminal, or every
path it names was written (or, for a read, read) through the gate. A completed
call that nothing explains is work the agent did without asking (for the
kinds in `UNASKED_KINDS`) or merely reported (the rest).

Pure bookkeeping: no I/O; the gate writes the records.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, Final

from governor.acp.models import schema
from governor.policies.paths import normalize
from governor.policies.shell import split

MAX_TOOL_CALLS: Final = 2048
"""Tool calls remembered at once, the ones mentioned last: an attempt's memory
must not grow with its length. A call mentioned again after 2,048 others were
starts afresh: a permission asked for it then is forgotten, and its completion
may be reported as done without asking (a conservative error)."""

UNASKED_KINDS: Final = frozenset({"edit", "delete", "move", "execute"})
"""Tool kinds that change something: done without the gate, they are unasked."""

Mention = schema.ToolCallStart | schema.ToolCallProgress | schema.ToolCallUpdate


@dataclass(slots=True)
class ToolCallState:
    """What the agent has reported about one tool call (upserted)."""

    id: str
    title: str = ""
    kind: str | None = None
    status: str = "pending"
    raw_input: Any = None
    locations: tuple[str, ...] = ()
    terminals: tuple[str, ...] = ()
    governed: bool = False
    judged: bool = False


class ToolCalls:
    """The attempt's tool calls by id, the `MAX_TOOL_CALLS` mentioned last;
    `on_new` is told of each id at its first mention (the budget counts them)."""

    __slots__ = ("_states", "on_new")

    def __init__(self, on_new: Callable[[str], None] | None = None) -> None:
        self._states: OrderedDict[str, ToolCallState] = OrderedDict()
        self.on_new = on_new

    def upsert(self, mention: Mention) -> ToolCallState:
        """The call's state with this mention folded in (made at its first mention)."""
        states = self._states
        state = states.get(mention.tool_call_id)
        if state is None:
            state = states[mention.tool_call_id] = ToolCallState(mention.tool_call_id)
            if len(states) > MAX_TOOL_CALLS:
                states.popitem(last=False)
            if self.on_new is not None:
                self.on_new(mention.tool_call_id)
        else:
            states.move_to_end(mention.tool_call_id)
        if mention.title:
            state.title = mention.title
        if mention.kind:
            state.kind = mention.kind
        if mention.status:
            state.status = mention.status
        raw = mention.raw_input
        if raw is not None and raw != {}:
            state.raw_input = raw
        locations = mention.locations
        if locations is not None:
            state.locations = tuple(loc.path for loc in locations)
        content = mention.content
        if content is not None:
            state.terminals = tuple(
                c.terminal_id for c in content if getattr(c, "type", None) == "terminal"
            )
        return state

    def __len__(self) -> int:
        return len(self._states)


def newly_completed(state: ToolCallState) -> bool:
    """True once per call, when it is first seen ended ``completed`` (a call that
    ended ``failed`` is judged too, and never reported)."""
    if state.status not in ("completed", "failed") or state.judged:
        return False
    state.judged = True
    return state.status == "completed"


def explained(
    state: ToolCallState,
    written: Collection[str],
    read: Set[str],
    terminals: Collection[str],
) -> bool:
    """Whether something governed accounts for a completed call: it was a
    permission request, it ran in one of the governed `terminals`, or every path
    it names was `written` (or, for a read, `read`) through the gate."""
    if state.governed:
        return True
    if any(t in terminals for t in state.terminals):
        return True
    if state.locations:
        if state.kind == "read":
            return all(normalize(p) in written or normalize(p) in read for p in state.locations)
        return all(normalize(p) in written for p in state.locations)
    return False


def report(state: ToolCallState) -> tuple[str, dict[str, Any], str]:
    """The record of a completed call nothing explains: its kind (``unasked`` for
    the kinds that change something, else ``reported``), subject and reason."""
    unasked = state.kind in UNASKED_KINDS
    subject: dict[str, Any] = {"tool_call": state.id, "title": state.title, "tool_kind": state.kind}
    if state.locations:
        subject["paths"] = list(state.locations)
    raw = state.raw_input if isinstance(state.raw_input, Mapping) else {}
    if isinstance(raw.get("command"), str):
        subject["command"] = raw["command"]
    if unasked:
        why = f"the agent reports a completed {state.kind} tool call that never came through the governor"
        return "unasked", subject, why
    return "reported", subject, f"the agent reports a completed {state.kind or 'other'} tool call"


def named_paths(locations: Sequence[str], command: object, cwd: str) -> frozenset[str]:
    """The files a permission's tool call names: its locations, and the files its
    shell command redirects to (relative ones against `cwd`), normalized."""
    paths = {normalize(p) for p in locations if p.startswith("/")}
    if isinstance(command, str):
        for part in split(command).commands:
            for target in part.writes:
                if "$" not in target and not target.startswith("~"):
                    paths.add(normalize(target if target.startswith("/") else f"{cwd}/{target}"))
    return frozenset(paths)
