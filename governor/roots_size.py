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
once copied), each inode once (hard links), symlinks not followed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Final

import trio

MIN_INTERVAL: Final = 2.0
"""Seconds between two walks at least."""


def held(roots: Sequence[str], stop_over: int | None = None) -> int:
    """Bytes the files under ``roots`` hold (see the module docstring); stops
    counting once past ``stop_over``."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = list(dict.fromkeys(roots))
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue  # gone or unreadable: nothing of it is counted
        with entries:
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
                    return total
    return total


async def watch(roots: Sequence[str], limit: int, over: Callable[[int], None]) -> None:
    """Walk ``roots`` every few seconds; call ``over`` with what they hold once
    it is past ``limit`` bytes, then return."""
    while True:
        started = time.monotonic()
        total = await trio.to_thread.run_sync(held, roots, limit, abandon_on_cancel=True)
        if total > limit:
            over(total)
            return
        await trio.sleep(max(MIN_INTERVAL, 10 * (time.monotonic() - started)))
