"""A batch's output folder: what is finished, and writing a job's result so
that a crash at any instant leaves nothing half-written that looks finished.

    OUT/outcomes.jsonl          one line per finished job: {"job": ID, status, reason, ...}
    OUT/<id>/audit.jsonl        the attempt's audit log (its first try's, with tries)
    OUT/<id>/audit.tryN.jsonl   with ``tries``: the Nth try's audit log
    OUT/<id>/changes.patch      the workspace's diff against the job's ref

Rules of this file:

- **The outcome line is the commit point.** A job's two files are written
  under temporary names, fsync'd and renamed into place; only then is its
  line appended to ``outcomes.jsonl`` and fsync'd. The patch is streamed into
  its temporary file while the job runs (`patch_file`: the batch never holds
  it whole) and committed the same way. A job is finished when its
  line is there *and* its files exist; anything less (files without a line, a
  line cut by a crash) is a job to run again.
- **Each id once.** Opening the folder drops from ``outcomes.jsonl`` what does
  not count (a cut last line, a line whose files are gone, a second line for
  an id), rewriting it atomically, so a rerun appends each job's line once.
- **One writer.** The folder is locked (``flock`` on ``OUT/.lock``) while a
  batch writes to it; a second batch on the same folder is refused.
- **Never through a link.** Everything below ``OUT`` is opened relative to a
  folder descriptor with ``O_NOFOLLOW``: a job folder must be a real folder
  owned by this user (made by a batch), a temporary file is made afresh
  (``O_EXCL``), and a rename replaces a link rather than following it. A link
  planted in ``OUT`` (``OUT/j1 -> elsewhere``) is refused, naming it, and
  nothing is written where it points.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from pathlib import Path
from typing import Any, Final

from governor.audit.reading import BATCH_LOG, BATCH_OUTCOMES
from governor.batch.work import JobResult
from governor.boundary import spelling

OUTCOMES: Final = BATCH_OUTCOMES
LOG: Final = BATCH_LOG
PATCH: Final = "changes.patch"
_TMP: Final = ".tmp-"
STREAMED: Final = f"{_TMP}stream-{PATCH}"
"""The temporary name a job's patch is streamed into (`Output.patch_file`)."""


class OutputBusy(Exception):
    """Another batch holds the output folder."""


class OutputUnsafe(Exception):
    """Something in the output folder is not what a batch made: a link, or a
    folder of another user's."""


_NOFOLLOW: Final = os.O_NOFOLLOW | os.O_CLOEXEC


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
        lock = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o644)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            raise OutputBusy(
                f"{self.root} is being written by another governor batch; wait for it, or "
                "give another --out"
            ) from None
        self._lock_fd = lock
        links = sorted(e.name for e in os.scandir(self.root) if e.is_symlink())
        if links:
            self.close()
            raise OutputUnsafe(
                f"{self.root} holds links a batch never makes ({', '.join(links)}): remove "
                "them, or give another --out; nothing was written",
            )
        self._recover()
        self._fd = os.open(
            self.root / OUTCOMES, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW, 0o644
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
            top = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                _replace(top, OUTCOMES, b"".join(kept))
            finally:
                os.close(top)
        for entry in os.scandir(self.root):
            if entry.is_dir(follow_symlinks=False):
                for leftover in Path(entry.path).glob(f"{_TMP}*"):
                    leftover.unlink(missing_ok=True)

    def patch_file(self, job: str) -> int:
        """A descriptor of a fresh, empty temporary file in ``job``'s folder for
        its patch to be streamed into while it runs (`STREAMED`, never
        through a link); `write` commits it when the result says it was
        streamed, `drop_patch` removes it when the job is not recorded."""
        fd = _job_folder(self.root, job)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(STREAMED, dir_fd=fd)
            return os.open(
                STREAMED, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644, dir_fd=fd
            )
        finally:
            os.close(fd)

    def drop_patch(self, job: str) -> None:
        """Remove ``job``'s streamed patch if it was not committed (an interrupted job)."""
        with contextlib.suppress(OSError):
            fd = os.open(self.root / job, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
            try:
                os.unlink(STREAMED, dir_fd=fd)
            finally:
                os.close(fd)

    def write(self, result: JobResult, patch: int | None = None) -> dict[str, Any]:
        """Record a finished job: its files first, then its outcome line (the
        commit point); returns that line. Safe to call from several threads.
        ``patch``: the descriptor `patch_file` gave, when the result's patch was
        streamed there."""
        assert self._fd is not None, "open the output first"
        assert result.patch_streamed == (patch is not None), "a streamed patch needs its file"
        folder = self.job_dir(result.job)
        fd = _job_folder(self.root, result.job)
        try:
            for name, data in result.try_logs.items():  # before the first's: LOG commits
                _replace(fd, name, data)
            _replace(fd, LOG, result.log)
            if patch is not None:
                os.fsync(patch)
                os.rename(STREAMED, PATCH, src_dir_fd=fd, dst_dir_fd=fd)
                os.fsync(fd)
            else:
                _replace(fd, PATCH, result.patch)
        finally:
            os.close(fd)
        line = {"job": result.job, **result.outcome}
        logs = {LOG, *result.try_logs}

        def placed(log: Any) -> str:  # a try's log, where the folder now holds it
            name = Path(str(log)).name if log else LOG
            return str(folder / (name if name in logs else LOG))

        line["log"] = placed(line.get("log"))
        for entry in line.get("tries") or []:
            entry["log"] = placed(entry.get("log"))
        line["changes"] = str(folder / PATCH)
        # a path the agent named in bytes that are not UTF-8 is a lone surrogate
        # here: written as the JSON escape it is (\udcff), never a crash of the batch
        data = spelling.dumps(line, separators=(",", ":")).encode() + b"\n"
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
            and _real_file(root / job / LOG)
            and _real_file(root / job / PATCH)
        ):
            found[job] = line
            kept.append(raw + b"\n")
    return found, kept


def _real_file(path: Path) -> bool:
    """A regular file reached through no link (the job's folder is not one either)."""
    return not path.parent.is_symlink() and path.is_file() and not path.is_symlink()


def _line(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _job_folder(root: Path, job: str) -> int:
    """A descriptor of ``root/job``, made if missing; refused (`OutputUnsafe`)
    when it is a link or not this user's folder."""
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(job, 0o755, dir_fd=top)
        try:
            fd = os.open(job, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=top)
        except OSError as e:
            raise OutputUnsafe(
                f"{root / job} is not a folder a batch made ({e.strerror}): not written"
            ) from None
    finally:
        os.close(top)
    if os.fstat(fd).st_uid != os.geteuid():
        os.close(fd)
        raise OutputUnsafe(f"{root / job} belongs to another user: not written")
    return fd


def _replace(folder: int, name: str, data: bytes) -> None:
    """Write ``data`` to ``name`` in the folder ``folder`` atomically: a fresh
    temporary file beside it (never through a link), fsync'd, renamed over it
    (a rename replaces a link, it does not follow one), the folder fsync'd."""
    tmp = f"{_TMP}{name}"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=folder)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644, dir_fd=folder)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    os.fsync(folder)


def read_outcomes(root: str | Path) -> dict[str, dict[str, Any]]:
    """The finished jobs of an output folder, by id, read without opening it for
    writing (by the same rules as `Output.open`)."""
    root = Path(root)
    try:
        data = (root / OUTCOMES).read_bytes()
    except FileNotFoundError:
        return {}
    return _finished(root, data)[0]
