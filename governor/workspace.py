"""Workspace snapshots: what changed in the roots, and what no governed action explains.

A snapshot maps each file (relative to its root) to ``(size, mtime_ns)``. Two
snapshots differ in created, changed and deleted files; `governor.attribution`
says what explains each difference (a governed write or command, an allowed
permission), and whatever nothing explains was done without asking.

Bounded: a walk stops after `MAX_FILES` files and says so, rather than stalling
an attempt on a huge tree. ``.git`` is walked only for what runs code later
(hooks, config).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

MAX_FILES: Final = 50_000
_GIT_KEEP: Final = ("hooks", "config", "info")


@dataclass(slots=True)
class Snapshot:
    """Files under the roots: absolute path -> (size, mtime_ns)."""

    files: dict[str, tuple[int, int]] = field(default_factory=dict)
    complete: bool = True


def snapshot(roots: Iterable[str], limit: int = MAX_FILES) -> Snapshot:
    """Walk the roots (not following symlinks) up to `limit` files."""
    snap = Snapshot()
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            if os.path.basename(dirpath) == ".git":
                dirnames[:] = [d for d in dirnames if d in _GIT_KEEP]
                filenames = [f for f in filenames if f in _GIT_KEEP]
            for name in filenames:
                path = os.path.join(dirpath, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                snap.files[path] = (st.st_size, st.st_mtime_ns)
                if len(snap.files) >= limit:
                    snap.complete = False
                    return snap
    return snap


@dataclass(frozen=True, slots=True)
class Change:
    """One file that differs: ``created``, ``changed`` or ``deleted``."""

    path: str
    how: str
    mtime_ns: int | None


def diff(before: Snapshot, after: Snapshot) -> list[Change]:
    """Created, changed and deleted files, sorted by path."""
    out: list[Change] = []
    for path, (size, mtime) in after.files.items():
        old = before.files.get(path)
        if old is None:
            out.append(Change(path, "created", mtime))
        elif old != (size, mtime):
            out.append(Change(path, "changed", mtime))
    if before.complete and after.complete:
        out.extend(Change(p, "deleted", None) for p in before.files.keys() - after.files.keys())
    return sorted(out, key=lambda c: c.path)
