"""Workspace snapshots: what changed in the roots, and what no governed action explains.

A snapshot maps each file (relative to its root) to what the kernel says of it
(`Seen`). The agent is the adversary here: it can write a file and put its
size and mtime back (``os.utime``), so those two alone miss a same-size edit.
What it cannot set is compared too: the inode's change time (``ctime``: every
write, ``utime``, ``chmod``, rename and link moves it to the clock's now, and
no call sets it, short of changing the clock, which a sandbox cannot) and the
inode number (a file replaced by a rename is another inode). Two snapshots
differ in created, changed and deleted files; `governor.attribution` says what
explains each difference (a governed write or command, an allowed permission),
and whatever nothing explains was done without asking.

Racy files (git's "racy git" problem, Documentation/technical/racy-git.txt in
git's tree): a timestamp is only as fine as its filesystem keeps it (a second
on ext4 with 128-byte inodes, on some network filesystems), so a file changed
in the same tick as the first snapshot looked at it could be changed again
with every field equal. A file whose ctime falls within `RACY_NS` of the walk
is hashed as well (when it is at most `RACY_MAX_BYTES`), and hashed again by
the next snapshot: few files are that fresh, so the walk stays a walk of
``lstat`` calls (bench/workspace.py).

A symlink is an entry like a file (to a folder too: it is not followed). A
root that is no folder is one entry itself (an agent's ``~/.claude.json``,
`governor.homes`).
Bounded: a walk stops after `MAX_FILES` files and says so, rather than stalling
an attempt on a huge tree. ``.git`` is walked only for what runs code later
(hooks, config).
"""

from __future__ import annotations

import gc
import hashlib
import os
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, NamedTuple

MAX_FILES: Final = 50_000
_GIT_KEEP: Final = ("hooks", "config", "info")
RACY_NS: Final = 2_000_000_000
"""How fresh a ctime makes a file racy: two of the coarsest timestamps kept
(one second), and the coarse kernel clock's lag behind the real one."""
RACY_MAX_BYTES: Final = 1 << 20
"""The largest racy file hashed; a larger one is compared by its fields alone."""


class Seen(NamedTuple):
    """What a snapshot keeps of one file. ``ctime_ns`` and ``ino`` are the
    kernel's, not the writer's; ``digest`` is the content's hash for a racy file
    (see the module), None otherwise."""

    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    mode: int
    digest: bytes | None = None


_make: Final = tuple.__new__
"""Builds a `Seen` without its generated ``__new__``'s call: a third of the cost
per file of a walk that is otherwise an ``lstat`` (bench/workspace.py)."""


def seen(st: os.stat_result) -> Seen:
    """What a snapshot keeps of a file whose ``lstat`` is ``st`` (no digest)."""
    return Seen(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)


@dataclass(slots=True)
class Snapshot:
    """Files under the roots: absolute path -> `Seen`."""

    files: dict[str, Seen] = field(default_factory=dict)
    complete: bool = True
    rechecked: bool = False
    """Whether every file of the snapshot it was taken after was looked at
    again: then a file of that one missing here was deleted, even where this
    walk stopped at its limit."""


def snapshot(
    roots: Iterable[str],
    limit: int = MAX_FILES,
    *,
    before: Snapshot | None = None,
    also_hash: Iterable[str] = (),
) -> Snapshot:
    """Walk the roots (not following symlinks) up to `limit` files. A racy file
    is hashed, and so is each file ``before`` hashed and each of ``also_hash``
    (the governed writes', whose digest the gate kept): its content is what
    tells an edit in the same tick from none.

    With ``before``, its files are looked at first, then the walk adds the new
    ones up to the limit: an agent that floods a root with files can hide
    files it made past the limit (the outcome says the walk stopped), never a
    change to one that was there."""
    # A snapshot's entries hold no references at all: collecting while some
    # 50,000 of them are made would only walk them, at a quarter of the walk's
    # cost (bench/workspace.py); paused as `governor.audit.log` pauses it.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _snapshot(roots, limit, before, also_hash)
    finally:
        if was_enabled:
            gc.enable()


def _snapshot(
    roots: Iterable[str], limit: int, before: Snapshot | None, also_hash: Iterable[str]
) -> Snapshot:
    snap = Snapshot(rechecked=before is not None)
    racy_from = time.time_ns() - RACY_NS
    kept = {} if before is None else before.files
    rehash = {path for path, old in kept.items() if old.digest is not None}
    rehash.update(also_hash)
    files = snap.files

    def look(path: str) -> None:
        try:
            st = os.lstat(path)
        except OSError:
            return
        ctime = st.st_ctime_ns
        digest = _digest(path, st) if ctime >= racy_from or path in rehash else None
        files[path] = _make(Seen, (st.st_size, st.st_mtime_ns, ctime, st.st_ino, st.st_mode, digest))

    for path in kept:
        look(path)
    for root in roots:
        if not os.path.isdir(root):  # a file root (an agent's ~/.claude.json) is one entry
            if root not in files and root not in kept:
                if len(files) >= limit:
                    snap.complete = False
                    return snap
                look(root)
            continue
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            if os.path.basename(dirpath) == ".git":
                dirnames[:] = [d for d in dirnames if d in _GIT_KEEP]
                filenames = [f for f in filenames if f in _GIT_KEEP]
            links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
            for name in (*filenames, *links):  # a link to a folder is listed as one
                path = os.path.join(dirpath, name)
                if path in files or path in kept:
                    continue  # looked at already (one of before's, present or gone)
                if len(files) >= limit:
                    snap.complete = False
                    return snap
                try:  # look(path), inline: this is the walk's every file
                    st = os.lstat(path)
                except OSError:
                    continue
                ctime = st.st_ctime_ns
                digest = _digest(path, st) if ctime >= racy_from or path in rehash else None
                files[path] = _make(
                    Seen, (st.st_size, st.st_mtime_ns, ctime, st.st_ino, st.st_mode, digest)
                )
    return snap


def content_digest(data: bytes) -> bytes | None:
    """The digest a snapshot would keep of a file holding ``data`` (None past
    `RACY_MAX_BYTES`): what the gate keeps of a file it wrote."""
    return hashlib.sha256(data).digest() if len(data) <= RACY_MAX_BYTES else None


def _digest(path: str, st: os.stat_result) -> bytes | None:
    """The SHA-256 of a regular file of at most `RACY_MAX_BYTES`, read without
    following a link; None for anything else or a file that went away."""
    if not stat.S_ISREG(st.st_mode) or st.st_size > RACY_MAX_BYTES:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return hashlib.sha256(os.read(fd, RACY_MAX_BYTES + 1)).digest()
    except OSError:
        return None
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class Change:
    """One file that differs: ``created``, ``changed`` or ``deleted``, with
    ``time_ns`` when it last changed: its ctime, which the agent cannot set
    (an mtime can be put anywhere, into an allowed permission's window too)."""

    path: str
    how: str
    time_ns: int | None


def differs(old: Seen, new: Seen) -> bool:
    """Whether a file changed between two snapshots: any field the kernel keeps,
    or its content where both hashed it."""
    if old[:5] != new[:5]:
        return True
    return old.digest is not None and new.digest is not None and old.digest != new.digest


def diff(before: Snapshot, after: Snapshot) -> list[Change]:
    """Created, changed and deleted files, sorted by path."""
    out: list[Change] = []
    for path, now in after.files.items():
        old = before.files.get(path)
        if old is None:
            out.append(Change(path, "created", now.ctime_ns))
        elif differs(old, now):
            out.append(Change(path, "changed", now.ctime_ns))
    if after.rechecked or (before.complete and after.complete):
        out.extend(Change(p, "deleted", None) for p in before.files.keys() - after.files.keys())
    return sorted(out, key=lambda c: c.path)
