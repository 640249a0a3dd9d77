"""Reading audit logs back: the files a name stands for, each log's records
grouped by attempt (read and verified in one pass over its bytes), one row
per attempt with the tally computed the same way the outcome computes it, and
one attempt's decision records streamed from its file (`decision_records`).

`governor audit`, anything that sums up logs (a batch's output) and whatever
prints an outcome's decision log read here; nothing in this file writes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final

from governor.audit.record_shape import malformed
from governor.audit.tally import Tally, tally
from governor.audit.verify import UNFINISHED, Problem, Verification, parsed, verify


class LogUnreadable(Exception):
    """A log named that cannot be read: missing, not a file, unreadable."""


class LogMalformed(LogUnreadable):
    """A log holding a record of a shape the governor never writes (`shape`):
    read back, its fields would mean nothing, so no reader shows it. The
    message names the file, the line and the field."""

    def __init__(self, path: str | Path, line: int, what: str) -> None:
        super().__init__(f"{path}: line {line} is not a record the governor writes: {what}")
        self.path, self.line, self.what = str(path), line, what


BATCH_OUTCOMES: Final = "outcomes.jsonl"
"""A folder holding this file is a batch's output (`governor.batch.output`): its
logs are ``<job>/audit.jsonl``; the outcomes file is not a log."""
BATCH_LOG: Final = "audit.jsonl"


def job_problem(root: Path, job: str, files: Sequence[str] = (BATCH_LOG,)) -> str | None:
    """Why ``job``, a name in a batch's outcomes, names no job folder of the
    batch output ``root`` (None: it does). A job's folder is one entry of
    ``root`` that is a real folder, and the ``files`` a reader opens in it are
    no links: a crafted ``"job": "../x"``, an absolute path or a planted link
    would make a reader open files outside the batch's folder."""
    if job in ("", ".", "..") or "/" in job or "\x00" in job:
        return "a job's name is one folder name inside the batch's folder, not a path"
    folder = root / job
    if folder.is_symlink():
        return "its folder is a link (a batch never makes one)"
    for name in files:
        if (folder / name).is_symlink():
            return f"its {name} is a link (a batch never makes one)"
    if folder.exists() and folder.resolve().parent != root.resolve():
        return "its folder is outside the batch's folder"
    return None


def is_batch_output(path: Path) -> bool:
    """Whether ``path`` is the output folder of a `governor batch`."""
    return (path / BATCH_OUTCOMES).is_file()


def log_files(paths: Sequence[str]) -> list[Path]:
    """The logs named: files as given, directories as every ``*.jsonl`` under them
    (a batch's output as each job's ``audit.jsonl``, and its later tries' logs)."""
    found: list[Path] = []
    for name in paths:
        p = Path(name)
        if p.is_dir() and is_batch_output(p):
            logs = [*p.glob(f"*/{BATCH_LOG}"), *p.glob("*/audit.try*.jsonl")]  # with tries
            found.extend(sorted(q for q in logs if q.is_file()))
        elif p.is_dir():
            found.extend(sorted(q for q in p.rglob("*.jsonl") if q.is_file()))
        elif p.is_file():
            found.append(p)
        elif p.exists():
            raise LogUnreadable(f"{name} is neither a file nor a directory")
        else:
            raise LogUnreadable(f"{name}: no such file or directory")
    return found


FRAMING: Final = ("attempt-start", "attempt-end")
"""The records that frame an attempt; every other record of it is a decision."""


def decision_records(
    log: str | Path | None, attempt: str, count: int | None = None
) -> Iterator[dict[str, Any]]:
    """One attempt's decision records (every record of `attempt` but its start
    and end), in order, read from the log file at `log` one line at a time:
    never all in memory, however long the attempt was. `count` (an outcome's
    ``decisions``) stops the read once that many were found, so that a log
    shared by later attempts is not read to its end. A torn or foreign line is
    skipped (another writer's, or a line cut by a crash); no `log` holds none.
    Raises `LogUnreadable`, naming the file, when it cannot be read, and
    `LogMalformed` for a record of the attempt the governor never wrote."""
    if log is None or count == 0:
        return
    found = 0
    try:
        with open(log, "rb") as f:
            for n, line in enumerate(f, 1):
                record = parsed(line)
                if record is not None and record.get("attempt") == attempt:
                    wrong = malformed(record)
                    if wrong is not None:
                        raise LogMalformed(log, n, wrong)
                    if record.get("kind") in FRAMING:
                        continue
                    yield record
                    found += 1
                    if found == count:
                        return
    except OSError as e:
        raise LogUnreadable(f"{log}: cannot read the log: {e.strerror or e}") from None


@dataclass(slots=True)
class AttemptRecords:
    """One attempt's records as read back from a log, in order."""

    attempt: str
    source: str
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def start(self) -> dict[str, Any] | None:
        """Its attempt-start record, when the log holds it."""
        first = self.records[0] if self.records else None
        return first if first is not None and first.get("kind") == "attempt-start" else None

    @property
    def end(self) -> dict[str, Any] | None:
        """Its attempt-end record, or None when the governor stopped before it."""
        final = self.records[-1] if self.records else None
        return final if final is not None and final.get("kind") == "attempt-end" else None


@dataclass(slots=True)
class LogFile:
    """One log read once: its attempts, its records with their line numbers, and
    its verification; ``malformed``, its first record of a shape the governor
    never writes (that record is in no attempt)."""

    path: Path
    attempts: list[AttemptRecords]
    numbered: list[tuple[int, dict[str, Any]]]
    check: Verification
    malformed: Problem | None = None


def checked_walk(
    f: BinaryIO,
    wanted: Collection[str],
    visit: Callable[[int, dict[str, Any]], None],
    *,
    stop: bool = False,
) -> tuple[Verification, Problem | None]:
    """One pass over a log's lines from ``f``: the chain verified as they stream
    past (noting the anchors in ``wanted``), each record's shape checked
    (`malformed`), and ``visit(line, record)`` called for every record of a shape
    the governor writes. Returns the verification and the first record of the
    wrong shape (None: none); with ``stop``, the reading ends there. Every
    reader of logs reads through this: one line in memory at a time."""
    first_wrong: list[Problem] = []

    def lines() -> Iterator[tuple[int, dict[str, Any] | None, str]]:
        for n, raw in enumerate(f, 1):
            raw = raw.removesuffix(b"\n")
            value = parsed(raw)
            yield n, value, raw.decode("utf-8", errors="replace")
            if value is None:
                continue
            wrong = malformed(value)
            if wrong is not None:
                if not first_wrong:
                    first_wrong.append(Problem(n, wrong))
                if stop:
                    return
                continue
            visit(n, value)

    walk = lines()
    check = verify(walk, wanted)
    for _ in walk:  # past the first problem: the records are still read
        pass
    return check, (first_wrong[0] if first_wrong else None)


def read_log(
    path: Path, wanted: Collection[str] = (), *, keep: bool = True, strict: bool = True
) -> LogFile:
    """Read, group by attempt and verify one log in a single pass over its lines
    (noting where the hashes in ``wanted``, anchors, are found), one line in
    memory at a time: with ``keep`` False no record is kept either (a check's
    memory is bounded by the longest line, not the log).

    Raises `LogUnreadable` naming the file when it cannot be read, and, when
    ``strict``, `LogMalformed` naming its first record of the wrong shape (not
    strict: the log's verification names it, as `verify` does)."""
    numbered: list[tuple[int, dict[str, Any]]] = []
    attempts: dict[str, AttemptRecords] = {}
    source = str(path)

    def visit(n: int, value: dict[str, Any]) -> None:
        attempt = value.get("attempt")
        if keep and isinstance(attempt, str):
            numbered.append((n, value))
            group = attempts.get(attempt)
            if group is None:
                group = attempts[attempt] = AttemptRecords(attempt, source)
            group.records.append(value)

    try:
        with path.open("rb") as f:
            check, wrong = checked_walk(f, wanted, visit)
    except OSError as e:
        raise LogUnreadable(f"{path}: cannot read the log: {e.strerror or e}") from None
    if strict and wrong is not None:
        raise LogMalformed(path, wrong.line, wrong.what)
    return LogFile(path, list(attempts.values()), numbered, check, wrong)


@dataclass(frozen=True, slots=True)
class Row:
    """One attempt, summed up."""

    attempt: str
    log: str
    agent: str
    status: str
    reason: str | None
    tally: Tally
    duration_s: float | None
    started: float | None
    workspace: str | None
    finished: bool

    def to_json(self) -> dict[str, Any]:
        """The row as plain JSON values."""
        out = asdict(self)
        out["tally"] = asdict(self.tally)
        return out


def row(group: AttemptRecords) -> Row:
    """An attempt's row: the tally is computed from its records (the same function
    the outcome uses), so the log and the outcome agree."""
    start, end = group.start, group.end
    records = group.records
    agent = str((start or {}).get("preset") or (start or {}).get("agent") or "?")
    t0 = (start or records[0]).get("time")
    duration: float | None = None
    if end is not None and isinstance(end.get("duration_s"), int | float):
        duration = float(end["duration_s"])
    elif isinstance(t0, int | float) and isinstance(records[-1].get("time"), int | float):
        duration = round(float(records[-1]["time"]) - float(t0), 3)
    return Row(
        attempt=group.attempt,
        log=group.source,
        agent=agent,
        status=str(end.get("status")) if end is not None else "unfinished",
        reason=(end or {}).get("reason") if end is not None else UNFINISHED,
        tally=tally(records),
        duration_s=duration,
        started=float(t0) if isinstance(t0, int | float) else None,
        workspace=(start or {}).get("workspace"),
        finished=end is not None,
    )
