"""How an attempt ends: its status, reason, tally and notices (the seed `external.rs`).

Statuses: ``completed`` (the turn ended and the agent reported success),
``blocked`` (the agent said ``BLOCKED:``, or stopped honestly for a person),
``failed``, ``incomplete`` (the agent stopped at its own limit) and
``needs_approval`` (an ``ask`` paused the attempt).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
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

    One pass, a few flags per request: it runs over every record of an attempt
    (tens of thousands for a busy agent) when the attempt ends.
    """
    # request -> [refused, waiting, a person decided]
    groups: dict[Any, list[bool]] = {}
    reported = unasked = 0
    for i, r in enumerate(records):
        kind = r.get("kind")
        if kind == "unasked":
            unasked += 1
            continue
        verdict = r.get("verdict")
        if verdict == "reported" or kind == "reported":
            reported += 1
            continue
        if kind not in _ASKED_KINDS:
            continue
        key = _group_key(r.get("request"), i)
        flags = groups.get(key)
        if flags is None:
            flags = groups[key] = [False, False, False]
        if verdict == "deny":
            flags[0] = True
        elif verdict == "approval":
            flags[1] = flags[2] = True
        if r.get("by") == "person":
            flags[2] = True
    refused = waiting = waited = 0
    for was_refused, was_waiting, person in groups.values():
        refused += was_refused
        waiting += was_refused or was_waiting
        waited += person
    return Tally(
        asked=len(groups),
        allowed=len(groups) - waiting,
        waited=waited,
        refused=refused,
        reported=reported,
        unasked=unasked,
    )


_ASKED_KINDS: Final = frozenset({"permission", "read", "write", "terminal"})
"""The record kinds that stand for something the agent asked."""


def _group_key(request: Any, index: int) -> Any:
    """The key that groups the records of one request: a record without a request
    id is a group of its own. The value's type is part of the key, as in its JSON
    (``1``, ``1.0``, ``true`` and ``"1"`` are different requests)."""
    if request is None:
        return ("#", index)
    if isinstance(request, (str, int, float)):
        return (type(request), request)
    return ("json", json.dumps(request, sort_keys=True))


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


@dataclass(slots=True)
class Outcome:
    """What one governed attempt came to; JSON-serializable with `to_json`."""

    status: str
    reason: str | None = None
    summary: str | None = None
    run_id: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    acp: AcpReport | None = None
    pending: dict[str, Any] | None = None
    log: str | None = None
    duration_s: float = 0.0
    sign_in: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown outcome status {self.status!r}")

    def to_json(self) -> dict[str, Any]:
        """The outcome as plain JSON values (the `external.rs` shape)."""
        out = asdict(self)
        return {k: v for k, v in out.items() if v is not None}
