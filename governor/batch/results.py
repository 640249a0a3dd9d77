"""What a batch reports as it goes (`Event`) and what it comes to (`BatchResult`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

EventKind = Literal["skipped", "queued", "started", "finished", "interrupted", "node"]


@dataclass(frozen=True, slots=True)
class Event:
    """One step of a batch: a job skipped (finished by an earlier run), the jobs
    queued for this run (``count``), a job started, finished (``line`` is its
    outcome line) or interrupted (Ctrl-C: it runs again on a rerun; without a
    job, the signal in ``info``); ``node``: a Ray node's sandbox check."""

    kind: EventKind
    job: str | None = None
    line: dict[str, Any] | None = None
    info: str | None = None
    count: int | None = None


OnProgress = Callable[[Event], None]


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """A finished job: its outcome line in ``outcomes.jsonl`` (``job``, ``status``,
    ``reason``, ``acp``, ..., ``log``, ``changes``)."""

    job: str
    line: dict[str, Any]
    earlier: bool = False
    """Finished by an earlier run into the same output (skipped this time)."""

    @property
    def status(self) -> str:
        """The outcome's status."""
        return str(self.line.get("status"))

    @property
    def reason(self) -> str | None:
        """The outcome's reason, when it has one."""
        reason = self.line.get("reason")
        return None if reason is None else str(reason)

    @property
    def log(self) -> Path:
        """The job's audit log."""
        return Path(self.line["log"])

    @property
    def changes(self) -> Path:
        """The job's patch (the workspace's diff against its ref)."""
        return Path(self.line["changes"])


@dataclass(slots=True)
class BatchResult:
    """Every finished job in the jobs' order, the ids that did not finish (an
    interrupted batch), and the output folder."""

    out: Path
    results: list[JobOutcome] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)
    interrupted: bool = False

    @property
    def counts(self) -> Counter[str]:
        """Finished jobs by status."""
        return Counter(r.status for r in self.results)

    @property
    def exit_code(self) -> int:
        """0 when every job finished ``completed``, else 1."""
        done = not self.not_run and all(r.status == "completed" for r in self.results)
        return 0 if done else 1
