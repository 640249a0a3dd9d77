"""A batch's output folder: what is finished, and writing a job's result so
that a crash at any instant leaves nothing half-written that looks finished.

    OUT/outcomes.jsonl          one line per finished job: {"job": ID, status, reason, ...}
    OUT/<id>/audit.jsonl        the attempt's audit log
    OUT/<id>/changes.patch      the workspace's diff against the job's ref

Rules of this file:

- **The outcome line is the commit point.** A job's two files are written
  under temporary names, fsync'd and renamed into place; only then is its
  line appended to ``outcomes.jsonl`` and fsync'd. A job is finished when its
  line is there *and* its files exist; anything less (files without a line, a
  line cut by a crash) is a job to run again.
- **Each id once.** Opening the folder drops from ``outcomes.jsonl`` what does
  not count (a cut last line, a line whose files are gone, a second line for
  an id), rewriting it atomically, so a rerun appends each job's line once.
- **One writer.** The folder is locked (``flock`` on ``OUT/.lock``) while a
  batch writes to it; a second batch on the same folder is refused.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from pathlib import Path
from typing import Any, Final

from governor.audit.reading import BATCH_LOG, BATCH_OUTCOMES
from governor.batch.work import JobResult

OUTCOMES: Final = BATCH_OUTCOMES
LOG: Final = BATCH_LOG
PATCH: Final = "changes.patch"
_TMP: Final = ".tmp-"


class OutputBusy(Exception):
    """Another batch holds the output folder."""


class Output:
    """The output folder of a batch, open for writing (`open`, then `write` per job)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser().resolve()
        self.finished: dict[str, dict[str, Any]] = {}
        """The outcome line of every finished job, by id."""
        self._fd: int | None = None
        self._lock_fd: int | None = None
        self._write_lock = threading.Lock()

    def job_dir(self, job: str) -> Path:
        """The folder of a job's files."""
        return self.root / job

    def open(self) -> Output:
        """Lock the folder (made if missing), read what is finished and drop
        what does not count."""
        self.root.mkdir(parents=True, exist_ok=True)
        lock = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            raise OutputBusy(
                f"{self.root} is being written by another governor batch; wait for it, or "
                "give another --out"
            ) from None
        self._lock_fd = lock
        self._recover()
        self._fd = os.open(
            self.root / OUTCOMES, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644
        )
        return self

    def close(self) -> None:
        """Release the folder."""
        for fd in (self._fd, self._lock_fd):
            if fd is not None:
                os.close(fd)
        self._fd = self._lock_fd = None

    def __enter__(self) -> Output:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recover(self) -> None:
        path = self.root / OUTCOMES
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""
        self.finished, kept = _finished(self.root, data)
        if b"".join(kept) != data:
            _replace(path, b"".join(kept))
        for leftover in self.root.glob(f"*/{_TMP}*"):
            leftover.unlink(missing_ok=True)

    def write(self, result: JobResult) -> dict[str, Any]:
        """Record a finished job: its files first, then its outcome line (the
        commit point); returns that line. Safe to call from several threads."""
        assert self._fd is not None, "open the output first"
        folder = self.job_dir(result.job)
        folder.mkdir(exist_ok=True)
        _replace(folder / LOG, result.log)
        _replace(folder / PATCH, result.patch)
        line = {"job": result.job, **result.outcome}
        line["log"] = str(folder / LOG)
        line["changes"] = str(folder / PATCH)
        data = json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        with self._write_lock:
            os.write(self._fd, data)
            os.fsync(self._fd)
            self.finished[result.job] = line
        return line


def _finished(root: Path, data: bytes) -> tuple[dict[str, dict[str, Any]], list[bytes]]:
    """The finished jobs in an ``outcomes.jsonl``'s bytes, by id, and the lines
    that count (newline included): not what follows the last newline (cut by a
    crash), not a line whose files are gone, not a second line of an id."""
    found: dict[str, dict[str, Any]] = {}
    kept: list[bytes] = []
    for raw in data.split(b"\n")[:-1]:
        line = _line(raw)
        job = None if line is None else line.get("job")
        if (
            isinstance(job, str)
            and line is not None
            and job not in found
            and (root / job / LOG).is_file()
            and (root / job / PATCH).is_file()
        ):
            found[job] = line
            kept.append(raw + b"\n")
    return found, kept


def _line(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file beside it,
    fsync'd, renamed over it, and the folder fsync'd."""
    tmp = path.with_name(f"{_TMP}{path.name}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def read_outcomes(root: str | Path) -> dict[str, dict[str, Any]]:
    """The finished jobs of an output folder, by id, read without opening it for
    writing (by the same rules as `Output.open`)."""
    root = Path(root)
    try:
        data = (root / OUTCOMES).read_bytes()
    except FileNotFoundError:
        return {}
    return _finished(root, data)[0]
