"""How an attempt ends: its status, reason, tally and notices (the seed `external.rs`).

Statuses: ``completed`` (the turn ended and the agent reported success),
``blocked`` (the agent said ``BLOCKED:``, or stopped honestly for a person),
``failed``, ``incomplete`` (the agent stopped at its own limit) and
``needs_approval`` (an ``ask`` paused the attempt).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from governor.audit.tally import Tally

STATUSES: Final = ("completed", "blocked", "failed", "incomplete", "needs_approval")

# stop reason -> (status when the final message is a plain summary, note)
STOP_REASONS: Final[Mapping[str, str]] = {
    "end_turn": "completed",
    "max_tokens": "incomplete",
    "max_turn_requests": "incomplete",
    "refusal": "failed",
    "cancelled": "failed",
}


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
    model: str | None = None
    """The model the agent was put on (``--model``), as the agent names it."""
    title: str | None = None
    """The session's title, when the agent gave it one."""
    config: dict[str, Any] = field(default_factory=dict)
    """The agent's config options at the end, id -> value (``allow_all``, ``mode``...)."""


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
    trace_id: str | None
    """The OpenTelemetry trace of the attempt (32 hex digits), also in the log's
    attempt-start record: what joins a trace and a log."""
    log_head: str | None
    """The hash of the log's last record of this attempt (its end record): the
    anchor `governor audit verify --head` checks the chain against, since a
    chain alone proves nothing to whoever can rewrite the whole file."""
    log_records: int | None
    """How many records the attempt wrote (the head's ``seq``)."""
    log_key: str | None
    """The fingerprint of the operator's key that signed the end record, if any."""

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
        trace_id: str | None = None,
        log_head: str | None = None,
        log_records: int | None = None,
        log_key: str | None = None,
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
        self.trace_id = trace_id
        self.log_head = log_head
        self.log_records = log_records
        self.log_key = log_key

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
            "trace_id": self.trace_id,
            "log_head": self.log_head,
            "log_records": self.log_records,
            "log_key": self.log_key,
        }
        return {k: v for k, v in out.items() if v is not None}


def _copied(value: Any) -> Any:
    """A copy of a JSON value (its dicts and lists new), as `asdict` gives."""
    if type(value) is dict:
        return {k: _copied(v) for k, v in value.items()}
    if type(value) is list:
        return [_copied(v) for v in value]
    return value
