"""Walking a tree the agent shaped: a folder it made unreadable is opened, never
taken for empty.

An agent running as the person's own user may ``chmod 0300`` a folder it made:
a walk as that user then lists nothing there (``os.walk`` drops the error
unless given ``onerror``), and whatever the folder holds escapes the snapshot,
the workspace limit and the tamper audit. Every walk of the roots (the
snapshot, the size watch, the frozen paths, the tries' delete, a batch job's
``git add`` before its patch: `opened_tree`) goes through `walk` here, with
one rule:

- **A folder the governor may not read or search is opened**: its owner's
  rights are given back (`give_back`, on the folder itself, never through a
  link: the mode is changed through an ``O_PATH`` descriptor of the folder
  opened without following a link), the walk goes on inside, and its mode is
  put back when the walk ends (`Opening.close`), so the workspace is left as
  it was found. The tries' delete gives back every right and puts nothing back.
- **A folder that cannot be opened** (another user's, or gone) is listed in
  `Opening.closed`: the snapshot keeps it as an entry of its own (a change
  when it changes or appears), the size watch counts it against the limit.
  It is never walked as if it were empty.

Root sees through any mode, so only an unprivileged governor needs this; both
run it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Final

READ: Final = stat.S_IRUSR | stat.S_IXUSR
"""What a walk needs of a folder: to list it and to look at what it lists."""
ALL: Final = stat.S_IRWXU
"""What a delete needs: to remove what a folder holds, too."""


def give_back(path: str, rights: int = READ) -> int | None:
    """Give the owner of the folder at ``path`` the ``rights`` it lacks; the mode
    it had (for `put_back`), or None when nothing was missing. The folder is
    opened without following a link (``O_PATH | O_NOFOLLOW``) and its mode set
    through that descriptor: a link put in its place is never followed to a
    folder elsewhere. OSError when it is not a folder, is gone or is not the
    governor's (``EPERM``)."""
    fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(20, "not a folder", path)
        mode = stat.S_IMODE(st.st_mode)
        if mode & rights == rights:
            return None
        os.chmod(f"/proc/self/fd/{fd}", mode | rights)  # the O_PATH descriptor's own inode
        return mode
    finally:
        os.close(fd)


def put_back(path: str, mode: int, rights: int = READ) -> None:
    """Set the folder at ``path`` back to ``mode`` (not following a link), if
    it still has the mode `give_back` left it (``mode | rights``): a folder
    whose mode the agent changed meanwhile keeps the agent's, one gone
    meanwhile is left gone."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == mode | rights:
                os.chmod(f"/proc/self/fd/{fd}", mode)
        finally:
            os.close(fd)


class Opening:
    """One walk's opened folders (their modes put back by `close`, in reverse
    order, unless ``put_back`` is False) and the ones that could not be opened."""

    def __init__(self, rights: int = READ, *, put_back: bool = True) -> None:
        self.rights = rights
        self.keep_modes = put_back
        self.opened: list[tuple[str, int]] = []
        self.closed: list[str] = []
        self._root = os.geteuid() == 0 and rights == READ

    def listing(self, path: str) -> list[os.DirEntry[str]] | None:
        """The entries of the folder at ``path``, opening it first when the
        governor may not read and search it; None when it cannot be opened
        (then it is in `closed`)."""
        if not self._root and not os.access(path, self.rights >> 6, follow_symlinks=False):
            try:
                old = give_back(path, self.rights)
            except FileNotFoundError:
                return None  # gone: nothing there to miss
            except OSError:
                self.closed.append(path)
                return None
            if old is not None:
                self.opened.append((path, old))
        try:
            with os.scandir(path) as entries:
                return list(entries)
        except FileNotFoundError:
            return None
        except OSError:
            self.closed.append(path)
            return None

    def close(self) -> None:
        """Put back the modes of the folders this walk opened (innermost first)."""
        if self.keep_modes:
            for path, mode in reversed(self.opened):
                put_back(path, mode, self.rights)
        self.opened.clear()

    def __enter__(self) -> Opening:
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.close()


def walk(top: str, opening: Opening) -> Iterator[tuple[str, list[str], list[str]]]:
    """Top-down, like ``os.walk(top, followlinks=False)`` with one difference:
    a link (to a folder too) is listed with the files, never as a folder. The
    caller may prune by changing the folder names it is given. A folder the
    governor may not read is opened (`Opening.listing`); one that cannot be
    is in ``opening.closed`` and yields nothing."""
    stack = [top]
    while stack:
        path = stack.pop()
        entries = opening.listing(path)
        if entries is None:
            continue
        dirs: list[str] = []
        files: list[str] = []
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            (dirs if is_dir else files).append(entry.name)
        yield path, dirs, files
        stack.extend(os.path.join(path, name) for name in reversed(dirs))


def opened_tree(top: str, skip: frozenset[str] = frozenset({".git"})) -> Opening:
    """Every folder under ``top`` opened for a program that walks the tree
    itself (``git add --all`` skips a folder it cannot read, with a warning, and
    the patch then lacks what it holds); folders named in ``skip`` are not
    entered. ``close()`` the result when the program is done: the modes go
    back."""
    opening = Opening()
    try:
        for _path, dirnames, _files in walk(top, opening):
            dirnames[:] = [d for d in dirnames if d not in skip]
    except BaseException:
        opening.close()
        raise
    return opening


def remove(path: Path) -> None:
    """Remove ``path`` (a link itself, never what it points at), making the
    folders the agent left unreadable or unwritable ours again first (a walk
    with every right given back and none put back): an agent's ``chmod 000``
    folder is deleted, not left behind. The one delete of a tree the agent
    shaped (the tries' copies, a batch job's folder)."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
        return
    with Opening(ALL, put_back=False) as opening:
        for _folder in walk(str(path), opening):  # top-down: opens each before it
            pass
    shutil.rmtree(path)
