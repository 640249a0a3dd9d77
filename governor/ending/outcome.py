"""How an attempt ends: its status, reason, tally and notices (the seed `external.rs`).

Statuses: ``completed`` (the turn ended and the agent reported success),
``blocked`` (the agent said ``BLOCKED:``, or stopped honestly for a person),
``failed``, ``incomplete`` (the agent stopped at its own limit) and
``needs_approval`` (an ``ask`` paused the attempt).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal, get_args

from governor.audit.tally import Tally
from governor.checks.check_values import CheckRun, Verdict
from governor.tamper.facts import Finding

Status = Literal["completed", "blocked", "failed", "incomplete", "needs_approval"]
"""What an attempt came to (the module docstring says each)."""
STATUSES: Final[tuple[Status, ...]] = get_args(Status)


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

    status: Status
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
    rejected_lines: int = 0
    """Lines of the agent rejected at the wire (not a JSON-RPC message the
    governor could read): each a ``wire`` record of the log, apart from the tally."""
    plan: list[dict[str, Any]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    sandboxed_agent: bool = True
    model: str | None = None
    """The model the agent was put on (``--model``), as the agent names it."""
    title: str | None = None
    """The session's title, when the agent gave it one."""
    config: dict[str, Any] = field(default_factory=dict)
    """The agent's config options at the end, id -> value (``allow_all``, ``mode``...)."""


@dataclass(slots=True)
class Outcome:
    """What one governed attempt came to, as plain values; JSON-serializable with
    `to_json`.

    The decision log (every record of the attempt but its start and end) stays
    in the audit log, where the outcome names it: ``log`` (its path), ``run_id``
    (the attempt's id) and ``decisions`` (how many records). Read the records
    with ``governor.audit.reading.decision_records(outcome.log, outcome.run_id)``:
    an iterator over the file, so an attempt of 40,000 decisions is never held
    in memory, and an outcome kept long after its attempt never reads a file by
    surprise. ``governor run --json`` streams them as ``tool_calls``
    (`governor.cli.outcome`)."""

    status: Status
    reason: str | None = None
    summary: str | None = None
    run_id: str = ""
    usage: dict[str, Any] | None = None
    acp: AcpReport | None = None
    pending: dict[str, Any] | None = None
    log: str | None = None
    decisions: int = 0
    """How many decision records of this attempt `log` holds."""
    duration_s: float = 0.0
    sign_in: str | None = None
    trace_id: str | None = None
    """The OpenTelemetry trace of the attempt (32 hex digits), also in the log's
    attempt-start record: what joins a trace and a log."""
    log_head: str | None = None
    """The hash of the log's last record of this attempt (its end record): the
    anchor `governor audit verify --head` checks the chain against, since a
    chain alone proves nothing to whoever can rewrite the whole file."""
    log_records: int | None = None
    """How many records the attempt wrote (the head's ``seq``)."""
    log_key: str | None = None
    """The fingerprint of the operator's key that signed the end record, if any."""
    workspace: str | None = None
    """The attempt's workspace (its first root), absolute, masked; None when no
    attempt was made."""
    findings: list[Finding] = field(default_factory=list)
    """The tamper audit of the attempt's diff (`governor.tamper`): tests deleted,
    assertions weakened, skip markers, runner configuration, suppressions."""
    files_changed: list[str] = field(default_factory=list)
    """The roots' files the attempt created, changed or deleted (the workspace
    diff), as absolute paths (a job may have several roots), sorted, masked."""
    home_changed: list[str] = field(default_factory=list)
    """The agent's own home folders' files (``~/.claude``, ...) the attempt
    created, changed or deleted, absolute, sorted, masked (`governor.ending.home_changes`):
    what the agent's next start on the host reads."""
    checks_run: list[CheckRun] = field(default_factory=list)
    """The job's checks after the attempt (`governor.checks.check_runs`), in order."""
    verdict: Verdict | None = None
    """``passed`` when every check exited 0 and every acceptance test ran and
    passed, ``failed`` otherwise; None without checks."""
    frozen: dict[str, Any] | None = None
    """The frozen files' count and digest at the start and the end of the
    attempt: ``{"start": {"sha256", "files"}, "end": {...}}``; None when the job
    freezes nothing (`governor.confine.frozen`)."""
    held_out: dict[str, Any] | None = None
    """The held-out files' count and digest when held out (``start``) and when
    put back for the checks (``end``), and ``replaced``: the held-out paths the
    agent had made something at; None when the job holds nothing out
    (`governor.checks.held_out`)."""
    tests: dict[str, Any] | None = None
    """The acceptance tests against the checks' reports (`governor.checks.test_results`):
    ``acceptance`` (how many), ``source`` (``job`` or ``frozen``), ``passed``,
    ``not_passed`` (each test and what it came to: failed, error, skipped,
    missing), ``failed_elsewhere``, ``unfinished_runs``; None without checks."""
    harness: dict[str, Any] | None = None
    """The checks' harness set (`governor.confine.harness`): ``mode``, and what the job
    ``added``, ``excepted`` and the checks ``named``; None without checks."""
    tries: list[dict[str, Any]] = field(default_factory=list)
    """With ``--tries`` (`governor.attempt.tries`): every try's outcome as JSON, in order,
    each with its number (``try``) and the ``digest`` its failed checks gave the
    next; this outcome is the last one's. Empty for a single attempt."""

    @property
    def tally(self) -> Tally:
        """The attempt's tally (``acp.tally``); all zeros when no ACP session
        was made (``acp`` is None: refused, failed at start, a command agent)."""
        return self.acp.tally if self.acp is not None else Tally()

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown outcome status {self.status!r}")

    def to_json(self) -> dict[str, Any]:
        """The outcome's values as plain JSON values (the `external.rs` shape but
        its ``tool_calls``, which the log holds), copied."""
        out = {
            "status": self.status,
            "reason": self.reason,
            "summary": self.summary,
            "run_id": self.run_id,
            "usage": _copied(self.usage),
            "acp": None if self.acp is None else asdict(self.acp),
            "pending": _copied(self.pending),
            "log": self.log,
            "workspace": self.workspace,
            "duration_s": self.duration_s,
            "sign_in": self.sign_in,
            "trace_id": self.trace_id,
            "log_head": self.log_head,
            "log_records": self.log_records,
            "log_key": self.log_key,
            "findings": [f.to_json() for f in self.findings],
            "files_changed": list(self.files_changed),
            "home_changed": list(self.home_changed),
            "checks_run": [c.to_json() for c in self.checks_run],
            "verdict": self.verdict,
            "frozen": _copied(self.frozen),
            "held_out": _copied(self.held_out),
            "tests": _copied(self.tests),
            "harness": _copied(self.harness),
            "tries": _copied(self.tries) or None,
        }
        return {k: v for k, v in out.items() if v is not None}


def _copied(value: Any) -> Any:
    """A copy of a JSON value (its dicts and lists new), as `asdict` gives."""
    if type(value) is dict:
        return {k: _copied(v) for k, v in value.items()}
    if type(value) is list:
        return [_copied(v) for v in value]
    return value
