"""Repeated refusals, counted instead of written one by one.

The agent chooses how many requests it sends, so a log that writes a full
record for every refusal is a log the agent can grow until the disk is full
(35,000 small refusals in 10 s were measured). Refusals of one kind from one
origin under one rule (``network`` from ``command`` under ``network.proxy``)
are written in full up to `BURST` per `WINDOW` seconds; past that they are
counted, and the count is written as one ``repeated`` record ("N more like
seq S") when the window of that key ends, at the next batch tick, or before
the attempt's end record. Only refusals are counted: anything that was
allowed, asked of a person or refused by a person is always written in full,
and so is every record of a request decided in several parts (or overruled):
the tally counts a request once, and could not if one of its records were
counted here and another written.

A counted refusal was answered before its ``repeated`` record was written:
the governor killed in between loses that count (a batch tick's worth at
most), never an allowed action.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

BURST: Final = 64
"""Refusals of one key written in full per window."""
WINDOW: Final = 1.0
"""Seconds."""
SAMPLES: Final = 8

Key = tuple[str, str, str, str]
"""(record kind, origin, rule, failed): a failure (`governor.audit.tally.FAILURES`,
``""`` for a refusal) is never counted with refusals, so that its ``repeated``
record says which it stands for."""


@dataclass(slots=True)
class Pending:
    """The refusals of one key counted and not yet written."""

    count: int = 0
    requests: int = 0
    """Distinct requests among them (a request's parts are written together)."""
    last_request: Any = None
    like: int | None = None
    """The seq of the last refusal of this key written in full."""
    since: float = 0.0
    samples: list[str] = field(default_factory=list)
    """The first `SAMPLES` distinct reasons among them (each cut to 200
    characters): a probe hidden in a flood of junk still shows."""


@dataclass(slots=True)
class _Window:
    start: float
    written: int = 0


def key_of(kind: str, fields: dict[str, Any]) -> Key | None:
    """The key a record is counted under, or None when it is always written
    (not a refusal, or a person's)."""
    if fields.get("verdict") != "deny" or fields.get("by") == "person":
        return None
    subject = fields.get("subject")
    origin = subject.get("origin", "agent") if isinstance(subject, dict) else "agent"
    failed = fields.get("failed")
    return kind, str(origin)[:32], str(fields.get("rule", ""))[:128], str(failed or "")[:32]


class Thinning:
    """Which refusals are written and which counted (see the module docstring)."""

    def __init__(self, clock: Callable[[], float], burst: int = BURST, window: float = WINDOW) -> None:
        self._clock = clock
        self.burst = burst
        self.window = window
        self._windows: dict[Key, _Window] = {}
        self.pending: dict[Key, Pending] = {}
        self._last: dict[Key, int] = {}

    def counted(self, key: Key, request: Any, reason: str = "") -> int | None:
        """None when this refusal is to be written; else it is counted, and the
        number of requests that adds (0: another part of the last one). A
        refusal written after a counted run of its key needs that run written
        first (`due` with its key)."""
        now = self._clock()
        window = self._windows.get(key)
        if window is None or now - window.start >= self.window:
            if len(self._windows) > 4096 and key not in self._windows:
                self._windows.clear()  # keys come from the agent's requests: bounded
            self._windows[key] = window = _Window(now)
        if window.written < self.burst:
            window.written += 1
            return None
        return self.count(key, request, reason)

    def count(self, key: Key, request: Any, reason: str = "") -> int:
        """Count one refusal of ``key``; the requests that adds (0 or 1)."""
        pending = self.pending.get(key)
        if pending is None:
            pending = self.pending[key] = Pending(since=self._clock())
        pending.count += 1
        sample = reason[:200]
        if sample and len(pending.samples) < SAMPLES and sample not in pending.samples:
            pending.samples.append(sample)
        if request == pending.last_request and pending.requests:
            return 0
        pending.requests += 1
        pending.last_request = request
        return 1

    def wrote(self, key: Key, seq: int) -> None:
        """A refusal of ``key`` was written in full as ``seq``."""
        if len(self._last) > 4096:
            self._last.clear()
        self._last[key] = seq

    def due(self, *, everything: bool = False, key: Key | None = None) -> list[tuple[Key, Pending]]:
        """The counts to write now, taken out: those whose window ended (all of
        them with ``everything``; only ``key``'s when given)."""
        now = self._clock()
        out = []
        for k, pending in list(self.pending.items()):
            if key is not None and k != key:
                continue
            window = self._windows.get(k)
            if everything or key is not None or window is None or now - window.start >= self.window:
                pending.like = self._last.get(k)
                out.append((k, self.pending.pop(k)))
        return out
