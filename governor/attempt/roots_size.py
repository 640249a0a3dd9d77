"""How much the writable roots hold, measured while the attempt runs.

The ``tmp`` limit bounds the sandbox's own tmpfs, not the roots: an agent
could write 200 MB into the workspace under ``tmp = "16M"``, and nothing
stopped it short of the disk. ``[limits] workspace`` bounds what the roots
hold, checked by a walk of them every few seconds (`watch`).

Why a walk and not a quota: a filesystem quota needs root and a filesystem
mounted with quotas (or a project id set on the roots: XFS or ext4 with the
``project`` feature), and the roots are the person's own directories on
whatever filesystem they live. A walk needs nothing, sees every filesystem,
and its cost is bounded by spacing the walks by ten times the last one's
duration; its price is that a fast writer may pass the limit by what it
writes between two walks before it is stopped.

A file's size is its apparent size (a sparse file counts what it would take
once copied), each inode once (hard links), symlinks not followed. A folder
the agent made unreadable is opened and counted (`governor.boundary.folders`); one
the governor cannot open is never counted as empty: unless it was there
already when the attempt began (the first snapshot's ``closed``), it stops
the attempt as over the limit, since what it holds cannot be bounded.

The same limit bounds what the agent adds to its **home folders** (a preset's
``home``: ``~/.codex``, ``~/.claude``, ...), bound writable in its sandbox:
they are the person's own, on the host's disk, and kept after the attempt, so
what the agent writes there is disk like the roots' and would otherwise be
bounded by nothing (gigabytes written there stay, every attempt adding to
them). They are walked with the roots, and what they hold *beyond what they
held when the attempt began* counts with the roots' whole size: the person's
own sessions and logs there, however large, are not the attempt's. Past the
limit the attempt stops; what was written stays (it is the person's folder:
nothing of theirs is deleted), at most the limit and one interval's writing.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Collection, Sequence
from typing import Final, NamedTuple

import trio

from governor.boundary.folders import Opening

MIN_INTERVAL: Final = 2.0
"""Seconds between two walks at least."""


class Measured(NamedTuple):
    """What a walk of the roots found: the bytes counted, and the folders it
    could not open (what they hold is not in ``total``)."""

    total: int
    closed: tuple[str, ...]


def held(roots: Sequence[str], stop_over: int | None = None) -> int:
    """Bytes the files under ``roots`` hold (see the module docstring); stops
    counting once past ``stop_over``."""
    return measure(roots, stop_over).total


def measure(roots: Sequence[str], stop_over: int | None = None) -> Measured:
    """`held`, with the folders the walk could not open."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack: list[str] = []
    for root in dict.fromkeys(roots):
        try:
            info = os.stat(root)  # a root is followed, as a listing of it would be
        except OSError:
            continue  # gone, or never made: nothing there
        if stat.S_ISDIR(info.st_mode):
            stack.append(root)
        elif stat.S_ISREG(info.st_mode):  # a home entry may be a file (~/.claude.json)
            total += info.st_size
    with Opening() as opening:
        while stack:
            entries = opening.listing(stack.pop())
            if entries is None:
                continue  # gone, or in opening.closed
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                        continue
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if info.st_nlink > 1:
                    inode = (info.st_dev, info.st_ino)
                    if inode in seen:
                        continue
                    seen.add(inode)
                total += info.st_size
                if stop_over is not None and total > stop_over:
                    return Measured(total, tuple(opening.closed))
        return Measured(total, tuple(opening.closed))


async def watch(
    roots: Sequence[str],
    limit: int,
    over: Callable[[int, tuple[str, ...]], None],
    closed_at_start: Collection[str] = (),
    homes: Sequence[str] = (),
    homes_at_start: int = 0,
) -> None:
    """Walk ``roots`` and ``homes`` every few seconds; call ``over`` with what
    they hold (the roots all of it, ``homes`` what they hold past
    ``homes_at_start`` bytes) once it is past ``limit`` bytes, or with the
    folders it could not open that were not ``closed_at_start`` nor closed at
    its first walk, then return.
    (The agent runs as the governor's user: a folder it makes, the governor
    can always open; one it cannot is another user's, and one there from the
    start, wherever the snapshot's walk stopped, is not the agent's doing.)"""
    known = set(closed_at_start)
    first = True
    while True:
        started = time.monotonic()
        found = await trio.to_thread.run_sync(measure, roots, limit, abandon_on_cancel=True)
        total, closed = found.total, found.closed
        if homes and total <= limit:
            left = homes_at_start + limit - total
            home = await trio.to_thread.run_sync(measure, homes, left, abandon_on_cancel=True)
            total += max(0, home.total - homes_at_start)
            closed += home.closed
        if first:
            known.update(closed)
            first = False
        new_closed = tuple(p for p in closed if p not in known)
        if total > limit or new_closed:
            over(total, new_closed)
            return
        await trio.sleep(max(MIN_INTERVAL, 10 * (time.monotonic() - started)))
