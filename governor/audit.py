"""The audit log: one JSON line per decision, hash-chained, written ahead.

Rules of this file:

- **Write-ahead.** `AuditLog.record` hands the line to the OS (one ``os.write``
  on an ``O_APPEND`` descriptor) before it returns, and callers answer the agent
  only after it returns -- so a decision the agent received survives the
  governor being killed. Disk durability is a setting: ``fsync = "always"``
  (`AuditLog.durable` waits for an fsync covering the record; concurrent
  decisions share one fsync: group commit) or ``"batch"`` (an fsync at most
  every 50 ms while dirty, and at the end).
- **Hash chain.** Every record carries ``prev`` (the previous record's hash in
  its attempt; null for the attempt-start record) and ``hash`` (SHA-256 of the
  canonical JSON of the record without ``hash``). `verify` finds the first line
  that was edited, deleted, inserted or reordered.
- **Masked.** Every string in a record is masked (`governor.secrets.Masker`)
  before it is hashed and written.
- **Fail closed.** A write that fails (disk full, read-only) raises
  `AuditUnavailable`; the governor then refuses every further action.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import trio

from governor.secrets import Masker

Durability = Literal["always", "batch"]
BATCH_INTERVAL: Final = 0.05


class AuditUnavailable(Exception):
    """The audit log cannot be written: nothing more may be allowed."""


def _canonical(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


def chain_hash(record: dict[str, Any]) -> str:
    """The hash of a record: SHA-256 over its canonical JSON without ``hash``."""
    body = {k: v for k, v in record.items() if k != "hash"}
    return hashlib.sha256(_canonical(body)).hexdigest()


class AuditLog:
    """One attempt's records: kept in memory and, with a path, appended to disk."""

    def __init__(
        self,
        path: Path | None,
        attempt: str,
        *,
        durability: Durability = "batch",
        masker: Masker | None = None,
    ) -> None:
        self.path = path
        self.attempt = attempt
        self.durability = durability
        self.masker = masker or Masker()
        self.records: list[dict[str, Any]] = []
        self._prev: str | None = None
        self._seq = 0
        self._fd: int | None = None
        self._written = 0  # seq of the last record handed to the OS
        self._synced = 0  # seq of the last record known fsynced
        self._sync_running = False
        self._sync_done = trio.Event()
        self._dirty = False
        self.broken: str | None = None
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(
                    path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600
                )
            except OSError as e:
                raise AuditUnavailable(f"cannot open the audit log {path}: {e.strerror}") from None

    # -- writing --------------------------------------------------------------------

    def record(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Append one record (masked, chained) and hand it to the OS before returning."""
        if self.broken is not None:
            raise AuditUnavailable(self.broken)
        self._seq += 1
        body: dict[str, Any] = {
            "seq": self._seq,
            "time": round(time.time(), 6),
            "attempt": self.attempt,
            "kind": kind,
            **{k: v for k, v in fields.items() if v is not None},
        }
        body = self.masker.json(body)
        body["prev"] = self._prev
        body["hash"] = chain_hash(body)
        line = _canonical(body) + b"\n"
        if self._fd is not None:
            try:
                written = os.write(self._fd, line)
                if written != len(line):
                    raise OSError(28, "short write (disk full?)")
            except OSError as e:
                self._seq -= 1
                self.broken = f"the audit log {self.path} cannot be written: {e.strerror or e}"
                raise AuditUnavailable(self.broken) from None
            self._written = self._seq
            self._dirty = True
        self._prev = body["hash"]
        self.records.append(body)
        return body

    async def durable(self, record: dict[str, Any]) -> None:
        """Wait until ``record`` is on disk when durability is ``always`` (group commit)."""
        if self._fd is None or self.durability != "always":
            return
        seq = record["seq"]
        while self._synced < seq:
            if not self._sync_running:
                await self._sync_once()
            else:
                await self._sync_done.wait()

    async def _sync_once(self) -> None:
        self._sync_running = True
        target = self._written
        done = self._sync_done
        try:
            fd = self._fd
            if fd is not None:
                await trio.to_thread.run_sync(os.fsync, fd)
            self._synced = max(self._synced, target)
            self._dirty = self._written > self._synced
        except OSError as e:
            self.broken = f"the audit log {self.path} cannot be synced: {e.strerror}"
            raise AuditUnavailable(self.broken) from None
        finally:
            self._sync_running = False
            self._sync_done = trio.Event()
            done.set()

    async def run_batch_sync(self) -> None:
        """In batch mode: fsync at most every 50 ms while there is something new."""
        if self._fd is None or self.durability != "batch":
            return
        while True:
            await trio.sleep(BATCH_INTERVAL)
            if self._dirty and not self._sync_running:
                await self._sync_once()

    def close(self) -> None:
        """Fsync what is left and close (at attempt end)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None


# -- reading back -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Problem:
    """The first thing wrong with a log: the 1-based line and what."""

    line: int
    what: str


@dataclass(frozen=True, slots=True)
class Verification:
    """A log's check: the first problem (if any) and attempts with no end record."""

    problem: Problem | None
    unfinished: tuple[str, ...]
    attempts: int
    records: int


def read_lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str]]:
    """(line number, record or None when not JSON, raw text) for each line."""
    with path.open("rb") as f:
        for n, raw in enumerate(f, 1):
            text = raw.decode("utf-8", errors="replace").rstrip("\n")
            try:
                value = json.loads(text)
            except ValueError:
                yield n, None, text
                continue
            yield n, value if isinstance(value, dict) else None, text


def verify(lines: Iterable[tuple[int, dict[str, Any] | None, str]]) -> Verification:
    """Check every record's hash and its link to the previous record of its attempt."""
    last: dict[str, tuple[str, int]] = {}  # attempt -> (hash, seq)
    ended: dict[str, bool] = {}
    count = 0
    for n, record, _ in lines:
        count += 1
        if record is None:
            return Verification(
                Problem(n, "line is not a JSON record (edited or corrupted)"), (), len(ended), count
            )
        attempt = record.get("attempt")
        if not isinstance(attempt, str) or "hash" not in record:
            return Verification(
                Problem(n, "line is not an audit record (inserted?)"), (), len(ended), count
            )
        if chain_hash(record) != record["hash"]:
            return Verification(
                Problem(n, "record does not match its hash (edited)"), (), len(ended), count
            )
        prev = last.get(attempt)
        seq = record.get("seq")
        if prev is None:
            if record.get("kind") != "attempt-start" or record.get("prev") is not None:
                return Verification(
                    Problem(
                        n,
                        "the chain of this attempt does not start here (a record before it was deleted, or this one was inserted or moved)",
                    ),
                    (),
                    len(ended),
                    count,
                )
        elif record.get("prev") != prev[0] or seq != prev[1] + 1:
            return Verification(
                Problem(
                    n,
                    f"record does not follow record {prev[1]} of its attempt (a record was deleted, inserted or reordered)",
                ),
                (),
                len(ended),
                count,
            )
        last[attempt] = (record["hash"], seq if isinstance(seq, int) else -1)
        ended[attempt] = record.get("kind") == "attempt-end"
    unfinished = tuple(a for a, done in ended.items() if not done)
    return Verification(None, unfinished, len(ended), count)
