"""How an attempt ends: its status, reason, tally and notices (the seed `external.rs`).

Statuses: ``completed`` (the turn ended and the agent reported success),
``blocked`` (the agent said ``BLOCKED:``, or stopped honestly for a person),
``failed``, ``incomplete`` (the agent stopped at its own limit) and
``needs_approval`` (an ``ask`` paused the attempt).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Final

STATUSES: Final = ("completed", "blocked", "failed", "incomplete", "needs_approval")

# stop reason -> (status when the final message is a plain summary, note)
STOP_REASONS: Final[Mapping[str, str]] = {
    "end_turn": "completed",
    "max_tokens": "incomplete",
    "max_turn_requests": "incomplete",
    "refusal": "failed",
    "cancelled": "failed",
}


@dataclass(frozen=True, slots=True)
class Tally:
    """What the agent asked, what was allowed, waited on, refused and reported."""

    asked: int = 0
    allowed: int = 0
    waited: int = 0
    refused: int = 0
    reported: int = 0
    unasked: int = 0


def tally(records: Iterable[Mapping[str, Any]]) -> Tally:
    """The tally of decision records, with the seed's semantics.

    One count per request: a permission request's several decisions (``cat a;
    ls b``) are one ask; a file or command call is its own. Refused: any deny in
    the group. Waited: a person decided (a grant is not a wait). Unasked records
    are counted apart.
    """
    counter = Tallier()
    for r in records:
        counter.add(r.get("kind"), r.get("verdict"), r.get("by"), r.get("request"))
    return counter.tally()


_REFUSED, _WAITING, _PERSON = 1, 2, 4


class Tallier:
    """`tally`, one record at a time: the audit log counts as it writes, so the
    end of an attempt does not walk (or parse) tens of thousands of records."""

    __slots__ = ("_alone", "_groups", "_reported", "_unasked")

    def __init__(self) -> None:
        self._groups: dict[Any, int] = {}  # request -> _REFUSED | _WAITING | _PERSON flags
        self._alone = 0  # records without a request id: each an ask of its own
        self._reported = 0
        self._unasked = 0

    def add(self, kind: Any, verdict: Any, by: Any, request: Any) -> None:
        """Count one record (its ``kind``, ``verdict``, ``by`` and ``request``)."""
        if kind == "unasked":
            self._unasked += 1
            return
        if verdict == "reported" or kind == "reported":
            self._reported += 1
            return
        if kind not in _ASKED_KINDS:
            return
        flags = 0
        if verdict == "deny":
            flags = _REFUSED
        elif verdict == "approval":
            flags = _WAITING | _PERSON
        if by == "person":
            flags |= _PERSON
        if request is None:
            self._alone += 1
            key: Any = ("#", self._alone)
        elif isinstance(request, (str, int, float)):
            # The value's type is part of the key, as in its JSON (1, 1.0, true
            # and "1" are different requests).
            key = (type(request), request) if type(request) is not int else request
        else:
            key = ("json", json.dumps(request, sort_keys=True))
        self._groups[key] = self._groups.get(key, 0) | flags

    def tally(self) -> Tally:
        """The counts so far."""
        refused = waiting = waited = 0
        for flags in self._groups.values():
            refused += flags & _REFUSED
            waiting += bool(flags & (_REFUSED | _WAITING))
            waited += bool(flags & _PERSON)
        return Tally(
            asked=len(self._groups),
            allowed=len(self._groups) - waiting,
            waited=waited,
            refused=refused,
            reported=self._reported,
            unasked=self._unasked,
        )


_ASKED_KINDS: Final = frozenset({"permission", "read", "write", "terminal"})
"""The record kinds that stand for something the agent asked."""


@dataclass(slots=True)
class Judgement:
    """A status, its reason, and the summary when the agent reported one."""

    status: str
    reason: str | None = None
    summary: str | None = None


def judged(message: str) -> Judgement:
    """An agent's final message after a turn it finished: ``BLOCKED:`` is an
    honest stop, ``FAILED:`` a failure, anything else its summary."""
    message = message.strip()
    summary = message[:2000]
    if message.startswith("BLOCKED:"):
        return Judgement("blocked", message.removeprefix("BLOCKED:").strip())
    if message.startswith("FAILED:"):
        return Judgement("failed", summary)
    return Judgement("completed", summary=summary)


def from_stop_reason(stop: str, message: str, agent: str) -> Judgement:
    """The judgement of a turn that ended with ``stop`` (the table `STOP_REASONS`)."""
    j = judged(message)
    status = STOP_REASONS.get(stop)
    if status is None:
        return Judgement("failed", f"{agent} ended its turn: {stop}")
    if stop == "refusal":
        return Judgement("failed", f"{agent} refused the task: {message.strip()[:500]}")
    if stop == "cancelled":
        return Judgement("failed", f"{agent}'s turn was cancelled")
    if status == "incomplete" and j.status == "completed":
        return Judgement("incomplete", f"{agent} stopped at its own limit ({stop})", j.summary)
    return j


@dataclass(slots=True)
class AcpReport:
    """The ACP side of an outcome: who ran, in which mode, and the tally."""

    agent: str
    preset: str
    mode: dict[str, Any] | None = None
    decides_alone: bool = False
    known: bool = False
    unasked: int = 0
    unasked_paths: list[str] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)
    plan: list[dict[str, Any]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    sandboxed_agent: bool = True


@dataclass(slots=True, init=False)
class Outcome:
    """What one governed attempt came to; JSON-serializable with `to_json`.

    ``tool_calls`` is the decision log: every record of the attempt but its start
    and end. It may be given as a function that makes it, called when it is
    first read -- an attempt of 40,000 decisions then parses its log only for a
    caller that looks at them."""

    status: str
    reason: str | None
    summary: str | None
    run_id: str
    _tool_calls: list[dict[str, Any]] | Callable[[], list[dict[str, Any]]] = field(repr=False)
    usage: dict[str, Any] | None
    acp: AcpReport | None
    pending: dict[str, Any] | None
    log: str | None
    duration_s: float
    sign_in: str | None

    def __init__(
        self,
        status: str,
        reason: str | None = None,
        summary: str | None = None,
        run_id: str = "",
        tool_calls: list[dict[str, Any]] | Callable[[], list[dict[str, Any]]] | None = None,
        usage: dict[str, Any] | None = None,
        acp: AcpReport | None = None,
        pending: dict[str, Any] | None = None,
        log: str | None = None,
        duration_s: float = 0.0,
        sign_in: str | None = None,
    ) -> None:
        if status not in STATUSES:
            raise ValueError(f"unknown outcome status {status!r}")
        self.status = status
        self.reason = reason
        self.summary = summary
        self.run_id = run_id
        self._tool_calls = [] if tool_calls is None else tool_calls
        self.usage = usage
        self.acp = acp
        self.pending = pending
        self.log = log
        self.duration_s = duration_s
        self.sign_in = sign_in

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The decision log (made when first read, then kept)."""
        calls = self._tool_calls
        if callable(calls):
            calls = self._tool_calls = calls()
        return calls

    @tool_calls.setter
    def tool_calls(self, value: list[dict[str, Any]]) -> None:
        self._tool_calls = value

    def to_json(self) -> dict[str, Any]:
        """The outcome as plain JSON values (the `external.rs` shape), copied."""
        out = {
            "status": self.status,
            "reason": self.reason,
            "summary": self.summary,
            "run_id": self.run_id,
            "tool_calls": _copied(self.tool_calls),
            "usage": _copied(self.usage),
            "acp": None if self.acp is None else asdict(self.acp),
            "pending": _copied(self.pending),
            "log": self.log,
            "duration_s": self.duration_s,
            "sign_in": self.sign_in,
        }
        return {k: v for k, v in out.items() if v is not None}


def _copied(value: Any) -> Any:
    """A copy of a JSON value (its dicts and lists new), as `asdict` gives."""
    if type(value) is dict:
        return {k: _copied(v) for k, v in value.items()}
    if type(value) is list:
        return [_copied(v) for v in value]
    return value
