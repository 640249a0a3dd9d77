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

What counts is the disk the filesystem gave: the blocks (``st_blocks``) of
every entry the walk meets, folders, links, FIFOs included (16,384 empty
folders are 64 MiB of an ext4 disk, and git tracks none of them), a regular
file at least its apparent size (a sparse file counts what it would take
once copied); each inode once (hard links), symlinks not followed. And the
disk no name leads to: a file the sandboxes' processes hold open after
unlinking it takes its blocks until the last descriptor closes; the
descriptors of every process of the attempt's sandboxes are read
(``/proc/PID/fd``, ``... (deleted)``, stat through the link), on the roots'
filesystems, each inode once (`held_unlinked`). A folder
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

import contextlib
import os
import stat
import time
from collections.abc import Callable, Collection, Sequence
from typing import Final, NamedTuple

import trio

from governor.boundary.folders import Opening
from governor.sandbox.host.budget import AttemptBudget, Sandboxed, processes

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


def measure(
    roots: Sequence[str],
    stop_over: int | None = None,
    holders: Sequence[int] = (),
    held_on: Sequence[str] = (),
) -> Measured:
    """`held`, with the folders the walk could not open; and the files the
    processes ``holders`` (the sandboxes') hold open on the roots' filesystems
    (and ``held_on``'s: the home folders, walked apart) that no name in the
    roots leads to (unlinked)."""
    seen: set[tuple[int, int]] = set()
    devices: set[int] = set()
    total = 0
    stack: list[str] = []
    for place in held_on:
        with contextlib.suppress(OSError):
            devices.add(os.stat(place).st_dev)
    for root in dict.fromkeys(roots):
        try:
            info = os.stat(root)  # a root is followed, as a listing of it would be
        except OSError:
            continue  # gone, or never made: nothing there
        devices.add(info.st_dev)
        if stat.S_ISDIR(info.st_mode):
            stack.append(root)
            seen.add((info.st_dev, info.st_ino))
            total += info.st_blocks * 512
        elif stat.S_ISREG(info.st_mode):  # a home entry may be a file (~/.claude.json)
            total += taken(info)
    with Opening() as opening:
        while stack:
            entries = opening.listing(stack.pop())
            if entries is None:
                continue  # gone, or in opening.closed
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
                elif info.st_nlink > 1:
                    inode = (info.st_dev, info.st_ino)
                    if inode in seen:
                        continue
                    seen.add(inode)
                total += taken(info)
                if stop_over is not None and total > stop_over:
                    return Measured(total, tuple(opening.closed))
        total += held_unlinked(holders, devices, seen)
        return Measured(total, tuple(opening.closed))


def taken(info: os.stat_result) -> int:
    """The disk an entry takes: the blocks the filesystem gave it (a folder,
    a link, a device node, a FIFO each take some: thousands of empty folders
    are disk too), and of a regular file at least its apparent size (a
    sparse file counts what it would take once copied)."""
    blocks = info.st_blocks * 512
    return max(blocks, info.st_size) if stat.S_ISREG(info.st_mode) else blocks


DELETED: Final = " (deleted)"
"""How ``/proc/PID/fd`` names the target of a file no longer linked where it was."""


def held_unlinked(pids: Sequence[int], devices: set[int], seen: set[tuple[int, int]]) -> int:
    """Bytes of the regular files ``pids`` hold open, on ``devices``, whose
    name is gone (``/proc/PID/fd/N`` reads ``... (deleted)``): written then
    unlinked, they take the disk until the last descriptor closes, and no
    walk finds them. Each inode once, those in ``seen`` (the walk's) left
    out. The governor may read the descriptors of its sandboxes' processes:
    their user namespace is its own child, root or not."""
    total = 0
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue  # gone
        for fd in fds:
            path = f"/proc/{pid}/fd/{fd}"
            try:
                if not os.readlink(path).endswith(DELETED):
                    continue
                info = os.stat(path)
            except OSError:
                continue
            inode = (info.st_dev, info.st_ino)
            if not stat.S_ISREG(info.st_mode) or info.st_dev not in devices or inode in seen:
                continue
            seen.add(inode)
            total += taken(info)
    return total


async def watch(
    roots: Sequence[str],
    limit: int,
    over: Callable[[int, tuple[str, ...]], None],
    closed_at_start: Collection[str] = (),
    homes: Sequence[str] = (),
    homes_at_start: int = 0,
    sandboxes: AttemptBudget | None = None,
) -> None:
    """Walk ``roots`` and ``homes`` every few seconds; call ``over`` with what
    they hold (the roots all of it, ``homes`` what they hold past
    ``homes_at_start`` bytes) once it is past ``limit`` bytes, or with the
    folders it could not open that were not ``closed_at_start`` nor closed at
    its first walk, then return. ``sandboxes``: the attempt's, whose
    processes' unlinked open files on the roots' and homes' filesystems count
    too, with the roots (a home's gain would count one twice).
    (The agent runs as the governor's user: a folder it makes, the governor
    can always open; one it cannot is another user's, and one there from the
    start, wherever the snapshot's walk stopped, is not the agent's doing.)"""
    known = set(closed_at_start)
    first = True
    while True:
        started = time.monotonic()
        running = sandboxes.running() if sandboxes is not None else []  # on the trio thread
        found = await trio.to_thread.run_sync(
            _measure_held, roots, limit, running, homes, abandon_on_cancel=True
        )
        total, closed = found.total, found.closed
        if homes and total <= limit:
            left = homes_at_start + limit - total
            home = await trio.to_thread.run_sync(
                measure, homes, left, abandon_on_cancel=True  # what is held open: with the roots
            )
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


def _measure_held(
    roots: Sequence[str], stop_over: int, running: list[Sandboxed], held_on: Sequence[str]
) -> Measured:
    """`measure`, the processes of the ``running`` sandboxes holding (in a worker thread)."""
    return measure(roots, stop_over, processes(running), held_on)
