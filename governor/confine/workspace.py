"""Workspace snapshots: what changed in the roots, and what no governed action explains.

A snapshot maps each file (relative to its root) to what the kernel says of it
(`Seen`). The agent is the adversary here: it can write a file and put its
size and mtime back (``os.utime``), so those two alone miss a same-size edit.
What it cannot set is compared too: the inode's change time (``ctime``: every
write, ``utime``, ``chmod``, rename and link moves it to the clock's now, and
no call sets it, short of changing the clock, which a sandbox cannot) and the
inode number (a file replaced by a rename is another inode). Two snapshots
differ in created, changed and deleted files; `governor.ending.attribution` says what
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
`governor.ending.home_changes`).
A folder the agent made unreadable is opened (`governor.boundary.folders`); one that
cannot be is an entry of its own (its mode says folder), so that it shows as a
change when it appears or changes, never as an empty folder.

What git knows first: the walk is bounded, but the bound (`MAX_FILES`) applies
only to what git ignores. The first snapshot of an attempt asks git, in each
root, which untracked files and folders it ignores (`git_ignored`, run with no
config but the repository's own and its fsmonitor off); every other file (what
git tracks or would track, and everything in a folder no repository holds) is
walked up to `KNOWN_MAX_FILES`, whatever the ignored files number. The later
snapshots use the first one's answer: what the agent writes into
``.gitignore`` never hides a file. So a new ``conftest.py`` in a workspace with
a build folder of a million ignored files is always seen. Limit: a negation
(``!vend/keep.py``) under an ignored folder is not followed past the bound.
The walk says whether what it left might matter (`Snapshot.left_unseen`): a
root git knows nothing of, or an ignored folder left unwalked that changed
since the first snapshot began. ``.git`` is walked only for what runs code
later (hooks, config).
"""

from __future__ import annotations

import gc
import hashlib
import os
import stat
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from governor.boundary.folders import Opening, walk
from governor.sandbox.host import processes

MAX_FILES: Final = 50_000
"""Files git ignores (or, outside a repository, any file) a walk looks at."""
KNOWN_MAX_FILES: Final = 1_000_000
"""Files git tracks or would track a walk looks at: past this, it stops."""
GIT_TIMEOUT: Final = 60.0
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


@dataclass(frozen=True, slots=True)
class Ignored:
    """What git ignores under one root, as the first snapshot found it: untracked
    folders whose every path git ignores, and untracked ignored files (absolute)."""

    folders: frozenset[str] = frozenset()
    files: frozenset[str] = frozenset()


@dataclass(slots=True)
class Snapshot:
    """Files under the roots: absolute path -> `Seen`."""

    files: dict[str, Seen] = field(default_factory=dict)
    complete: bool = True
    rechecked: bool = False
    """Whether every file of the snapshot it was taken after was looked at
    again: then a file of that one missing here was deleted, even where this
    walk stopped at its limit."""
    ignored: dict[str, Ignored | None] = field(default_factory=dict)
    """Per root, what git ignored there when the first snapshot was taken (None:
    no repository holds the root, or git could not say)."""
    started_ns: int = 0
    """When the first snapshot of the attempt began."""
    left_unknown: bool = False
    """The walk stopped where git did not say the files were ignored."""
    left_ignored: dict[str, int] = field(default_factory=dict)
    """Ignored folders left unwalked past `MAX_FILES`: path -> their ctime."""
    closed: list[str] = field(default_factory=list)
    """Folders the walk could not open (kept as entries of their own)."""

    def left_unseen(self) -> bool:
        """Whether a file this walk did not look at might matter: it stopped
        where git did not say the files were ignored, or an ignored folder it
        left had files made or removed in it since the first snapshot began."""
        return self.left_unknown or bool(self.changed_unwalked())

    def changed_unwalked(self) -> list[str]:
        """The ignored folders the walk left that had files made or removed in
        them since the first snapshot began (sorted)."""
        return sorted(p for p, ctime in self.left_ignored.items() if ctime >= self.started_ns)


def snapshot(
    roots: Iterable[str],
    limit: int = MAX_FILES,
    *,
    before: Snapshot | None = None,
    also_hash: Iterable[str] = (),
    opening: Opening | None = None,
) -> Snapshot:
    """Walk the roots (not following symlinks) up to `limit` files. A racy file
    is hashed, and so is each file ``before`` hashed and each of ``also_hash``
    (the governed writes', whose digest the gate kept): its content is what
    tells an edit in the same tick from none. With ``opening``, the folders the
    walk opened stay open until the caller closes it (to read the files, as
    the tamper audit does); without, their modes are put back before return.

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
        if opening is not None:  # the caller reads the files next, then puts the modes back
            return _snapshot(roots, limit, before, also_hash, opening)
        with Opening() as own:
            return _snapshot(roots, limit, before, also_hash, own)
    finally:
        if was_enabled:
            gc.enable()


def _snapshot(
    roots: Iterable[str],
    limit: int,
    before: Snapshot | None,
    also_hash: Iterable[str],
    opening: Opening,
) -> Snapshot:
    snap = Snapshot(rechecked=before is not None)
    now_ns = time.time_ns()
    snap.started_ns = before.started_ns if before is not None else now_ns
    racy_from = now_ns - RACY_NS
    kept = {} if before is None else before.files
    rehash = {path for path, old in kept.items() if old.digest is not None}
    rehash.update(also_hash)
    files = snap.files

    denied: list[str] = []

    def look(path: str) -> None:
        try:
            st = os.lstat(path)
        except PermissionError:
            denied.append(path)  # in a folder made unsearchable: again once the walk opened it
            return
        except OSError:
            return
        ctime = st.st_ctime_ns
        digest = _digest(path, st) if ctime >= racy_from or path in rehash else None
        files[path] = _make(Seen, (st.st_size, st.st_mtime_ns, ctime, st.st_ino, st.st_mode, digest))

    roots = list(dict.fromkeys(roots))
    for root in roots:
        if before is not None and root in before.ignored:
            snap.ignored[root] = before.ignored[root]
        else:
            snap.ignored[root] = git_ignored(root)
    for path in kept:
        look(path)
    # files looked at: [git ignores them, or no git knows; git would track them];
    # the files kept from before count against the first bound, as they always did
    counted = [len(files) + len(denied), 0]
    for root in roots:
        if not os.path.isdir(root):  # a file root (an agent's ~/.claude.json) is one entry
            if root not in files and root not in kept:
                look(root)
                counted[0] += 1
            continue
        if not _walk_root(root, snap, kept, limit, counted, racy_from, rehash, opening):
            break
    again, denied[:] = list(denied), []
    for path in again:  # the walk opened their folders (or could not: then they stay unseen)
        look(path)
    for folder in opening.closed:  # never taken for empty: an entry of its own
        look(folder)
    snap.closed = list(opening.closed)
    return snap


def _walk_root(
    root: str,
    snap: Snapshot,
    kept: dict[str, Seen],
    limit: int,
    counted: list[int],
    racy_from: int,
    rehash: set[str],
    opening: Opening,
) -> bool:
    """Walk one root into ``snap``; False when the walk must stop altogether
    (past `KNOWN_MAX_FILES`, or past ``limit`` where git knows nothing)."""
    files = snap.files
    ignored = snap.ignored.get(root)
    known = ignored is not None
    ig_folders = ignored.folders if ignored is not None else frozenset()
    ig_files = ignored.files if ignored is not None else frozenset()
    below: set[str] = set()  # folders inside an ignored folder
    for dirpath, dirnames, filenames in walk(root, opening):
        if os.path.basename(dirpath) == ".git":
            dirnames[:] = [d for d in dirnames if d in _GIT_KEEP]
            filenames = [f for f in filenames if f in _GIT_KEEP]
        inside = dirpath in below
        if known and dirnames:
            keep = []
            for d in dirnames:
                child = os.path.join(dirpath, d)
                if inside or child in ig_folders:
                    if counted[0] >= limit:  # the bound: only what git ignores is left
                        snap.complete = False
                        _left(snap, child)
                        continue
                    below.add(child)
                keep.append(d)
            dirnames[:] = keep
        for name in filenames:
            path = os.path.join(dirpath, name)
            if path in files or path in kept:
                continue  # looked at already (one of before's, present or gone)
            slot = 0 if not known or inside or path in ig_files else 1
            if slot == 0 and counted[0] >= limit:
                snap.complete = False
                if not known:
                    snap.left_unknown = True
                    return False
                _left(snap, dirpath)  # an ignored file of a folder walked in part
                continue
            if slot == 1 and counted[1] >= KNOWN_MAX_FILES:
                snap.complete = False
                snap.left_unknown = True
                return False
            try:  # look(path), inline: this is the walk's every file
                st = os.lstat(path)
            except OSError:
                continue
            counted[slot] += 1
            ctime = st.st_ctime_ns
            digest = _digest(path, st) if ctime >= racy_from or path in rehash else None
            files[path] = _make(
                Seen, (st.st_size, st.st_mtime_ns, ctime, st.st_ino, st.st_mode, digest)
            )
    return True


def _left(snap: Snapshot, folder: str) -> None:
    """Note ``folder`` as one the walk left (in part) with its ctime, which moves
    when a file is made, removed or renamed in it."""
    if folder not in snap.left_ignored:
        try:
            snap.left_ignored[folder] = os.lstat(folder).st_ctime_ns
        except OSError:
            snap.left_ignored[folder] = snap.started_ns  # gone: it changed


def git_ignored(root: str) -> Ignored | None:
    """What git ignores under ``root`` (see the module's header), or None when no
    repository holds it or git cannot say. git runs on a tree the agent may
    have shaped (a later attempt's workspace), so nothing of it may run: it
    starts through the host door (`governor.sandbox.host.processes`: an absolute
    program, the governor's empty folder as its cwd, a PATH of system
    folders), with no system or global config, the fsmonitor and untracked
    cache off, no hooks, no optional locks (nothing written), no prompt, a
    deadline."""
    program = processes.find_program("git")
    if program is None or not os.path.isdir(root):
        return None
    env = {
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_TERMINAL_PROMPT": "0",
        "HOME": "/nonexistent",
    }
    base = [
        program, "-C", root,
        "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false",
        "-c", "core.hooksPath=/dev/null", "-c", "safe.directory=*",
    ]  # fmt: skip

    def run(args: list[str], feed: bytes = b"") -> bytes | None:
        try:
            host = processes.command([*base, *args], env=env)
            done = subprocess.run(
                list(host.argv), input=feed, capture_output=True, env=dict(host.env),
                cwd=host.cwd, timeout=GIT_TIMEOUT, check=False,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError, processes.HostProcessRefused):
            return None
        return done.stdout if done.returncode in (0, 1) else None

    listed = run(["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"])
    if listed is None:
        return None
    names = [n for n in listed.decode("utf-8", "surrogateescape").split("\0") if n]
    if any(n in ("./", ".") for n in names):
        return None  # the root itself is ignored: git says nothing of its files
    folders = [n for n in names if n.endswith("/")]
    matched: list[str] = []
    if folders:  # listed because all it holds is ignored is not ignored itself
        said = run(["check-ignore", "-z", "--stdin"], "\0".join(folders).encode("utf-8", "surrogateescape"))
        if said is None:
            return None
        matched = [n for n in said.decode("utf-8", "surrogateescape").split("\0") if n]
    return Ignored(
        frozenset(os.path.join(root, n.rstrip("/")) for n in matched),
        frozenset(os.path.join(root, n) for n in names if not n.endswith("/")),
    )


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
