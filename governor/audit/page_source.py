"""What the report page shows of one attempt, folded from its log in one pass,
one line in memory at a time: the page of a million-record attempt is built in
the memory of a thousand-record one.

Rules of this file:

- **Bounded.** An `AttemptPage` keeps the attempt's start and end records, its
  counts, and the first `PAGE_ROWS` rows of each table (timeline, refusals,
  changes without asking); everything past them is counted, never kept. The
  tally is `Tallier`'s, fed record by record, as the outcome computes it.
- **At most two attempts folded.** Choosing the attempt (an exact id, else the
  only one an id is a prefix of, else the only one in the logs) needs every id,
  and the logs are read once: so the first attempt that could be the one is
  folded while the ids are listed, beside the exact match when it differs
  (`Chooser`); the choice is made, or refused naming the ids, at the end.
- **Read as `governor.audit.reading` reads.** A line is parsed by the same
  `parsed`, verified by the same `verify` while it streams past, and a record
  of a shape the governor never writes is refused (`LogMalformed`) by the same
  `malformed`; the records of the log are the same records the other readers
  see.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from governor.audit.reading import FRAMING, LogMalformed, LogUnreadable, checked_walk
from governor.audit.replay import shown
from governor.audit.tally import Tallier, Tally
from governor.audit.verify import UNFINISHED, Verification

PAGE_ROWS: Final = 2000
"""Rows a table of the page holds at most: a million-record attempt would make a
page of hundreds of megabytes that no browser opens. The page says what it
left out and which command lists it all."""

UNASKED_KINDS: Final = ("unasked",)
"""The records of changes made without asking that nothing explains: the
page's "changes without asking"."""
CHANGE_KINDS: Final = ("changed", "diff")
"""The records of changes something explains: ``changed`` (the agent made it
under a permission it was allowed: ``explained_by``) and ``diff`` (what a
governed write changed in a file): the page's changes table."""
RESULT_KINDS: Final = ("exit", "diff")
"""Records of what an allowed action did (a command's exit and its output's
tail, a governed write's diff): results, not decisions, so not in the
timeline's count of decisions."""


@dataclass(slots=True)
class AttemptPage:
    """One attempt as its page shows it: framing records, counts, the first rows."""

    attempt: str
    source: str
    rows: int = PAGE_ROWS
    start: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    records: int = 0
    """All its records, the framing ones included."""
    decisions: int = 0
    first_time: float | None = None
    last_time: float | None = None
    timeline: list[dict[str, Any]] = field(default_factory=list)
    refusals: list[dict[str, Any]] = field(default_factory=list)
    refused_total: int = 0
    unasked: list[dict[str, Any]] = field(default_factory=list)
    unasked_total: int = 0
    changes: list[dict[str, Any]] = field(default_factory=list)
    changes_total: int = 0
    commands: list[dict[str, Any]] = field(default_factory=list)
    """The ``exit`` records: each command's exit and the newest lines of its output."""
    commands_total: int = 0
    models: list[dict[str, Any]] = field(default_factory=list)
    """The ``model`` records: each model call the proxy saw on the wire."""
    models_total: int = 0
    refusal_groups: dict[tuple[str, ...], list[Any]] = field(default_factory=dict)
    """Identical refusals as one: (kind, what, by, rule, reason) -> [first record,
    how many]; the first `rows` groups are kept, later refusals of a kept group
    counted in it, of a new group counted only in ``refused_total``."""
    failed_total: int = 0
    failure_groups: dict[tuple[str, ...], list[Any]] = field(default_factory=dict)
    """Identical failures (a record with ``failed``: no rule refused it, it could
    not be done) as one, kept as `refusal_groups` are: an agent retrying an API
    that does not resolve is one row with its count, apart from the refusals."""
    tallier: Tallier = field(default_factory=Tallier)
    _thinned: dict[tuple[str, str, str, str], tuple[str, ...]] = field(default_factory=dict)
    """Thinning's key (kind, origin, rule, failed) -> the group of its last refusal
    (or failure) written."""

    def add(self, record: dict[str, Any]) -> None:
        """Fold one of the attempt's records in."""
        self.records += 1
        at = record.get("time")
        if isinstance(at, int | float):
            self.first_time = float(at) if self.first_time is None else self.first_time
            self.last_time = float(at)
        kind = record.get("kind")
        if kind in FRAMING:
            if kind == "attempt-start" and self.records == 1:
                self.start = record
            elif kind == "attempt-end":
                self.end = record
            return
        self.end = None  # a record after an end: the end was not the last word
        if kind in CHANGE_KINDS:
            self.changes_total += 1
            if len(self.changes) < self.rows:
                self.changes.append(record)
        if kind == "model":
            self.models_total += 1
            if len(self.models) < self.rows:
                self.models.append(record)
        if kind == "exit":
            self.commands_total += 1
            if len(self.commands) < self.rows:
                self.commands.append(record)
        if kind in RESULT_KINDS:
            return
        self.tallier.take(record)
        self.decisions += 1
        if len(self.timeline) < self.rows:
            self.timeline.append(record)
        if record.get("verdict") == "deny" or kind == "repeated":
            self._refused(record)
        if kind in UNASKED_KINDS:
            self.unasked_total += 1
            if len(self.unasked) < self.rows:
                self.unasked.append(record)

    def _refused(self, record: dict[str, Any]) -> None:
        """One refusal folded into its group of identical ones; a ``repeated``
        record (refusals the log counted instead of writing them one by one,
        `governor.audit.repeated_refusals`) into the group of the last refusal written
        under its key, which they were like."""
        repeated = record.get("kind") == "repeated"
        count = record.get("count") if repeated else 1
        count = count if type(count) is int and count > 0 else 1
        failed = str(record.get("failed") or "")[:32]
        if failed:
            self.failed_total += count
            groups = self.failure_groups
        else:
            self.refused_total += count
            groups = self.refusal_groups
            if len(self.refusals) < self.rows:
                self.refusals.append(record)
        if repeated:
            thinned = (str(record.get("of")), str(record.get("origin")), str(record.get("rule")), failed)
            key = self._thinned.get(thinned) or _refusal_key(record)
        else:
            key = _refusal_key(record)
            subject = record.get("subject")
            origin = subject.get("origin", "agent") if isinstance(subject, dict) else "agent"
            rule = str(record.get("rule"))[:128]
            self._thinned[(str(record.get("kind")), str(origin)[:32], rule, failed)] = key
            if len(self._thinned) > self.rows:
                self._thinned.pop(next(iter(self._thinned)))
        group = groups.get(key)
        if group is not None:
            group[1] += count
        elif len(groups) < self.rows:
            groups[key] = [record, count]

    @property
    def tally(self) -> Tally:
        """Its tally, computed from its records as the outcome computes it."""
        return self.tallier.tally()

    @property
    def status(self) -> str:
        """Its end record's status, ``unfinished`` without one."""
        return str(self.end.get("status")) if self.end is not None else "unfinished"

    @property
    def reason(self) -> str | None:
        """Its end record's reason (or why there is none)."""
        return self.end.get("reason") if self.end is not None else UNFINISHED

    @property
    def started(self) -> float | None:
        """When it started: its start record's time, else its first record's."""
        at = (self.start or {}).get("time")
        return float(at) if isinstance(at, int | float) else self.first_time

    @property
    def duration_s(self) -> float | None:
        """Its end record's duration, else the time from its first record to its last."""
        if self.end is not None and isinstance(self.end.get("duration_s"), int | float):
            return float(self.end["duration_s"])
        if self.started is None or self.last_time is None:
            return None
        return round(self.last_time - self.started, 3)


def _refusal_key(record: dict[str, Any]) -> tuple[str, ...]:
    """What makes two refusals the same row: what was refused, by whom, why."""
    fields = [str(record.get(k))[:SHOWN_KEY] for k in ("kind", "by", "rule", "reason")]
    return (*fields, shown(record)[:SHOWN_KEY])


SHOWN_KEY: Final = 1000
"""What of a refusal's fields its group's key holds (the page shows no more)."""


class Chooser:
    """Which attempt of the logs is the page's (``wanted``: an id or a prefix of
    one; None: the only attempt), and its fold; ``last`` takes the last attempt
    instead (a batch job's log: its last try is the job's)."""

    def __init__(self, wanted: str | None, *, rows: int = PAGE_ROWS, last: bool = False) -> None:
        self.wanted, self.rows, self.last = wanted, rows, last
        self.ids: dict[str, int] = {}
        """Every attempt id seen, with the index of the log it is in."""
        self.exact: AttemptPage | None = None
        self.first: AttemptPage | None = None
        self.matches = 0

    def folds(self, attempt: str, source: str, log: int) -> AttemptPage | None:
        """The fold a record of ``attempt`` goes to, or None (not the page's)."""
        if attempt not in self.ids:
            self.ids[attempt] = log
            page = None
            if self.wanted is not None and attempt == self.wanted:
                page = self.exact = AttemptPage(attempt, source, self.rows)
            if self.wanted is None or attempt.startswith(self.wanted):
                self.matches += 1
                if self.first is None or self.last:
                    self.first = page or AttemptPage(attempt, source, self.rows)
        for page in (self.exact, self.first):
            if page is not None and page.attempt == attempt:
                return page
        return None

    def chosen(self) -> tuple[AttemptPage, int]:
        """The page's attempt and the index of its log; `LookupError` naming the
        choices when the id names none or several, `ValueError` for several
        attempts and no id."""
        if self.exact is not None:
            return self.exact, self.ids[self.exact.attempt]
        if self.first is not None and (self.matches == 1 or self.last):
            return self.first, self.ids[self.first.attempt]
        if self.wanted is None:
            raise ValueError(f"the logs hold {len(self.ids)} attempts")
        if not self.matches:
            raise LookupError(f"no attempt {self.wanted!r} in the logs read ({len(self.ids)} attempt(s))")
        raise LookupError(
            f"{self.wanted!r} names {self.matches} attempts: give more of the id"
        )

    def choices(self, most: int = 20) -> str:
        """The ids seen, for an error (the first ``most``)."""
        names = list(self.ids)
        more = f" and {len(names) - most} more" if len(names) > most else ""
        return ", ".join(names[:most]) + more


def fold_log(path: Path, chooser: Chooser, log: int = 0, wanted: Collection[str] = ()) -> Verification:
    """Read one log once: verify it (noting the anchors in ``wanted``) and fold
    the records of the attempts ``chooser`` may choose. Raises `LogUnreadable`
    naming the file, and `LogMalformed` for its first record of a shape the
    governor never writes."""
    source = str(path)

    def visit(_: int, value: dict[str, Any]) -> None:
        attempt = value.get("attempt")
        if isinstance(attempt, str):
            page = chooser.folds(attempt, source, log)
            if page is not None:
                page.add(value)

    try:
        with path.open("rb") as f:
            check, wrong = checked_walk(f, wanted, visit, stop=True)
    except OSError as e:
        raise LogUnreadable(f"{path}: cannot read the log: {e.strerror or e}") from None
    if wrong is not None:
        raise LogMalformed(path, wrong.line, wrong.what)
    return check
