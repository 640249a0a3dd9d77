"""A log read in passes, never held: the check first (the chain verified, every
record's shape checked, the attempts it holds named), then as many passes over
its records as a view needs, one line in memory at a time.

Why two passes and not one: a view prints as it reads (a million refusals are
a million lines), and a record of a shape the governor never writes must be an
error before anything is printed, not after half a table or inside a JSON
document already begun. The check finds it first; a later pass only shows.

Rules of this file:

- **Nothing grows with the records.** A pass yields one record at a time; what
  the check keeps is per attempt (its id), as `verify`'s chain state is.
- **A later pass reads what the check read.** It stops at the size the check
  saw (a writer still appending adds lines no check covered), and a file
  replaced in between is an error, not a different log shown as checked.
- **A record of the wrong shape is still refused.** A later pass checks the
  shape again, so that a line changed between the passes cannot reach a view.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any

from governor.audit.reading import LogMalformed, LogUnreadable, Row, checked_walk
from governor.audit.record_shape import malformed
from governor.audit.tally import Tallier, Tally
from governor.audit.verify import UNFINISHED, Problem, Verification, parsed


@dataclass(slots=True)
class Checked:
    """One log's first pass: its verification, the attempts its records belong to
    (in the order they first appear) and the bytes read, where a later pass stops."""

    path: Path
    check: Verification
    attempts: list[str] = field(default_factory=list)
    size: int = 0
    identity: tuple[int, int] = (0, 0)
    """The file's device and inode when checked."""
    malformed: Problem | None = None


def check_log(path: Path, wanted: Collection[str] = (), *, strict: bool = True) -> Checked:
    """Verify ``path`` and check the shape of every record, keeping no record
    (noting where the hashes in ``wanted``, anchors, are found).

    Raises `LogUnreadable` naming the file when it cannot be read, and, when
    ``strict``, `LogMalformed` naming its first record of the wrong shape (not
    strict: the verification names it, as `verify` does)."""
    attempts: dict[str, None] = {}

    def visit(_: int, value: dict[str, Any]) -> None:
        attempt = value.get("attempt")
        if isinstance(attempt, str):
            attempts[attempt] = None

    try:
        with path.open("rb") as f:
            stat = os.fstat(f.fileno())
            check, wrong = checked_walk(f, wanted, visit)
            size = f.tell()
    except OSError as e:
        raise LogUnreadable(f"{path}: cannot read the log: {e.strerror or e}") from None
    if strict and wrong is not None:
        raise LogMalformed(path, wrong.line, wrong.what)
    return Checked(path, check, list(attempts), size, (stat.st_dev, stat.st_ino), wrong)


def records(
    log: Checked, attempts: Collection[str] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for each record of the checked log that belongs to
    an attempt (to one of ``attempts`` when given), in order, up to where the
    check stopped. Raises `LogUnreadable` when the file cannot be read or is no
    longer the one checked, `LogMalformed` for a record of the wrong shape."""
    left = log.size
    try:
        with log.path.open("rb") as f:
            stat = os.fstat(f.fileno())
            if (stat.st_dev, stat.st_ino) != log.identity:
                raise LogUnreadable(f"{log.path}: the log was replaced while it was read")
            for n, raw in enumerate(f, 1):
                if left <= 0:
                    return
                raw = raw[:left]
                left -= len(raw)
                record = parsed(raw.removesuffix(b"\n"))
                if record is None:
                    continue
                attempt = record.get("attempt")
                if not isinstance(attempt, str) or (attempts is not None and attempt not in attempts):
                    continue
                wrong = malformed(record)
                if wrong is not None:
                    raise LogMalformed(log.path, n, wrong)
                yield n, record
    except OSError as e:
        raise LogUnreadable(f"{log.path}: cannot read the log: {e.strerror or e}") from None


class RowSum:
    """An attempt's `Row` summed one record at a time: what
    `governor.audit.reading.row` computes from all of its records, from its
    first record, its last, its end and a `Tallier` (bounded however long the
    attempt)."""

    __slots__ = ("_end", "_last_time", "_settled", "_start", "_t0", "_tallier", "attempt", "source")

    def __init__(self, attempt: str, source: str, first: dict[str, Any]) -> None:
        self.attempt, self.source = attempt, source
        is_start = first.get("kind") == "attempt-start"
        self._start = {k: first.get(k) for k in ("preset", "agent", "workspace")} if is_start else None
        self._t0 = first.get("time")
        self._last_time: Any = None
        self._end: dict[str, Any] | None = None
        self._tallier = Tallier()
        self._settled = Tally()

    def add(self, record: dict[str, Any]) -> None:
        """Count the attempt's next record (its first included)."""
        self._tallier.take(record)
        self._last_time = record.get("time")
        if record.get("kind") != "attempt-end":
            self._end = None
            return
        self._end = {k: record.get(k) for k in ("status", "reason", "duration_s")}
        # An ended attempt's requests are complete: its open groups are counted
        # and dropped, so that ten thousand ended attempts hold ten thousand tallies.
        self._settled = _plus(self._settled, self._tallier.tally())
        self._tallier = Tallier()

    def row(self) -> Row:
        """The attempt's row so far."""
        start, end, t0 = self._start or {}, self._end, self._t0
        duration: float | None = None
        if end is not None and isinstance(end.get("duration_s"), int | float):
            duration = float(end["duration_s"])
        elif isinstance(t0, int | float) and isinstance(self._last_time, int | float):
            duration = round(float(self._last_time) - float(t0), 3)
        return Row(
            attempt=self.attempt,
            log=self.source,
            agent=str(start.get("preset") or start.get("agent") or "?"),
            status=str(end.get("status")) if end is not None else "unfinished",
            reason=end.get("reason") if end is not None else UNFINISHED,
            tally=_plus(self._settled, self._tallier.tally()),
            duration_s=duration,
            started=float(t0) if isinstance(t0, int | float) else None,
            workspace=start.get("workspace"),
            finished=end is not None,
        )


def _plus(a: Tally, b: Tally) -> Tally:
    return Tally(*(x + y for x, y in zip(astuple(a), astuple(b), strict=True)))


def rows(log: Checked) -> list[Row]:
    """One row per attempt of a checked log, in the order the attempts first
    appear: one pass over its records."""
    sums: dict[str, RowSum] = {}
    source = str(log.path)
    for _, record in records(log):
        attempt = record["attempt"]
        summed = sums.get(attempt)
        if summed is None:
            summed = sums[attempt] = RowSum(attempt, source, record)
        summed.add(record)
    return [s.row() for s in sums.values()]
