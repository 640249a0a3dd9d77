"""Sealed stubs at the file level, and the sweeper that removes a dead governor's.

See `governor.sandbox.run.stubs` for why stubs are sealed (made immutable) and who relies on
them. This module holds what both the governor and its sweeper process need,
and nothing else: it imports only the standard library, because the sweeper
runs it *by path* as ``python -I -S sweeper.py GRACE`` with ``/`` as its
working directory. Importing the ``sandbox`` package instead would put the
governor's working directory (often the agent's workspace) on ``sys.path`` of a
process that may run as root, outside any sandbox.

The sweeper reads JSON lines ``["+", path, dev, ino]`` (a stub was sealed or
taken over) and ``["-", path, dev, ino]`` (it was deleted) on stdin. When stdin
closes with stubs still listed, its governor is gone without cleaning up: it
waits ``GRACE`` seconds, then deletes each listed stub once nobody relies on it
any more, polling while a sandbox still does.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import struct
import sys
import time
from typing import Final, Literal

FS_IOC_GETFLAGS: Final = 0x80086601
FS_IOC_SETFLAGS: Final = 0x40086602
FS_IMMUTABLE_FL: Final = 0x00000010
SEAL_MARK: Final = "trusted.acp-governor.stub"
"""Extended attribute naming a sealed stub as ours; only ``CAP_SYS_ADMIN`` can set
``trusted.*``, so a sandbox cannot make a user's file look like one."""
POLL_SECONDS: Final = 1.0
PLACEHOLDER_CONTENT: Final = {"commondir": b".\n"}
"""What a placeholder holds, by name, where an empty file is not "nothing here"
to the tools that read it: git dies on an empty ``commondir`` ("failed to
read"), and ``.`` names the git dir itself as its common dir. A ``*.json`` name
holds ``{}`` (see `placeholder`): agents parse ``.mcp.json`` and warn on an empty
one. Every other placeholder is empty."""

Sweep = Literal["deleted", "in use", "not ours"]


def get_flags(fd: int) -> int:
    """The inode flags (``lsattr``) of an open file."""
    flags: int = struct.unpack("i", fcntl.ioctl(fd, FS_IOC_GETFLAGS, bytes(8))[:4])[0]
    return flags


def set_flags(fd: int, flags: int) -> None:
    fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("i", flags) + bytes(4))


def placeholder(path: str) -> bytes:
    """The content of the placeholder for ``path`` (see `PLACEHOLDER_CONTENT`)."""
    name = os.path.basename(path)
    if name in PLACEHOLDER_CONTENT:
        return PLACEHOLDER_CONTENT[name]
    return b"{}\n" if name.endswith(".json") else b""


def holds_placeholder(fd: int, path: str, st: os.stat_result) -> bool:
    """Whether the open regular file ``fd`` (``st``: its fstat) holds exactly what
    a placeholder for ``path`` is written with, and nothing else: a person's
    file that happens to sit where a stub was is never taken for one."""
    expected = placeholder(path)
    if not stat.S_ISREG(st.st_mode) or st.st_size != len(expected):
        return False
    return not expected or os.pread(fd, len(expected) + 1, 0) == expected


def sandbox_holds(fd: int) -> bool:
    """Whether some process holds a POSIX lock on the file: a sandbox's pid 1
    takes a read lock on every sealed stub it relies on (bwrap ``--lock-file``)."""
    probe = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
    answer = fcntl.fcntl(fd, fcntl.F_GETLK, probe)
    kind: int = struct.unpack("hhqqi4x", answer)[0]
    return kind != fcntl.F_UNLCK


def unseal_and_delete(path: str, dev: int, ino: int, fd: int | None = None) -> Sweep:
    """Delete the sealed stub ``(dev, ino)`` at ``path`` if nobody else relies on it.

    "Nobody" means: no other governor holds a ``flock`` on it (an exclusive one
    is taken here, so a governor cannot take a share meanwhile) and no sandbox
    holds a POSIX lock on it. ``fd`` is the caller's own locked descriptor, if
    it has one; it is closed in any case. A file that is not sealed, marked and
    holding exactly the placeholder's content is never touched, even with the
    same device and inode: inode numbers are reused, and the sweeper may hear of
    a deletion late or never.
    """
    if fd is None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return "not ours"
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (dev, ino) or not holds_placeholder(fd, path, st):
            return "not ours"
        if not get_flags(fd) & FS_IMMUTABLE_FL or not os.getxattr(fd, SEAL_MARK):
            return "not ours"
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return "not ours"  # another governor relies on it: its job now
        if sandbox_holds(fd):
            return "in use"
        here = os.lstat(path)
        if (here.st_dev, here.st_ino) != (dev, ino):
            return "not ours"
        set_flags(fd, get_flags(fd) & ~FS_IMMUTABLE_FL)
        os.unlink(path)
        return "deleted"
    except OSError:
        return "not ours"
    finally:
        os.close(fd)


def main(grace: float) -> None:
    """The sweeper process: see the module docstring."""
    listed: dict[str, tuple[int, int]] = {}
    for line in sys.stdin.buffer:
        op, path, dev, ino = json.loads(line)
        if op == "+":
            listed[path] = (dev, ino)
        elif listed.get(path) == (dev, ino):
            del listed[path]
    if not listed:
        return
    time.sleep(grace)
    while listed:
        for path, (dev, ino) in list(listed.items()):
            if unseal_and_delete(path, dev, ino) != "in use":
                del listed[path]
        if listed:
            time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    main(float(sys.argv[1]))
