"""Files the person names (``-o``, ``--events``, ``--log``, ``--prompt-file``,
``--policy``): written and read without going through a link an agent left.

The governor opens these on the host, as the person, often inside a project an
attempt worked in. A name there may be a link an earlier attempt made
(``audit.html -> ~/.bashrc``, ``prompts/task.md -> ~/.aws/credentials``): by
name, a write would replace or append to any file the person can write, with
text the agent chose, and a read would hand the next agent a file its sandbox
hides. So:

- **an output** (`open_output`, `write_output`) is opened with ``O_NOFOLLOW``:
  a new file with ``O_CREAT | O_EXCL`` (a link in its place, even dangling, is
  never followed), an existing one only when it is a regular file, else
  `NamedFileRefused` naming the path and what it is (a character device, as
  ``/dev/null``, is written too: no agent can make one); nothing is truncated
  or written before that is known;
- **a link on the way** (`link_out`), in a folder an attempt could write
  (`written`: the folders the host door keeps, `governor.sandbox.host.processes`,
  by path and by identity, so a project renamed since, or one under ``/tmp``,
  is still one), is followed only when where it leads lies inside that same
  folder: a link the agent could have made never leads the governor out of the
  agent's own folders. A link elsewhere was the person's (``~/work ->
  /mnt/data``) and is followed, as any program would;
- **an input** (`read_input`) is read under the same rule, its last component
  too (a policy file that is the person's own link into their dotfiles still
  reads).

Rules of this room: the standard library only; the caller says which folders
an attempt could write (a list of paths, or `WrittenFolders`, which the host
door's record answers).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

_NOFOLLOW: Final = os.O_NOFOLLOW | os.O_CLOEXEC
_NOT_REGULAR: Final = (
    "it is not a regular file: the governor writes only a file of its own, a regular "
    "file or a device (/dev/null) there (give '-' for the standard output where it is offered)"
)


class NamedFileRefused(OSError):
    """A file the person named was not opened: it is a link, not a regular file,
    or reached through a link an attempt could have made that leads out of
    its folder. An `OSError` (``strerror`` says why, ``filename`` is the path),
    so a caller that reports ``OSError`` reports this one in its own words."""

    def __init__(self, path: str | Path, why: str) -> None:
        super().__init__(errno.ELOOP, why, str(path))


@runtime_checkable
class WrittenFolders(Protocol):
    """The folders an attempt could write, asked folder by folder: a record
    that knows a folder by more than its path (its identity, after a rename)
    answers for it (`governor.sandbox.host.processes.WrittenPlaces`)."""

    def holding(self, path: str) -> Sequence[str]:
        """The folders an attempt could write that hold ``path`` (a real path):
        itself or a folder above it, each as it is named now."""
        ...


Written = Sequence[str] | WrittenFolders
"""Real paths of the folders an attempt could write, or a record to ask."""


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _holding(written: Written, path: str) -> Sequence[str]:
    if isinstance(written, WrittenFolders):
        return written.holding(path)
    return [folder for folder in written if _under(path, folder)]


def link_out(path: str | Path, written: Written) -> str | None:
    """Why ``path`` may not be opened: a link on its way (its last component
    too) that lies in a folder of ``written`` (real paths of folders an attempt
    could write, or a record that knows them) and leads outside that folder.
    None when there is none."""
    if isinstance(written, Sequence) and not written:
        return None
    named = os.fspath(path)
    # walked as the kernel does: ``..`` goes up from where the last link led,
    # never lexically (``ws/link/../x`` is the link target's parent's ``x``)
    current = "/" if named.startswith("/") else os.path.realpath(os.getcwd())
    for part in named.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        step = os.path.join(current, part)
        if not os.path.islink(step):
            current = step
            continue
        target = os.path.realpath(step)
        for folder in _holding(written, current):
            if not _under(target, folder):
                return (
                    f"{step} is a link to {target}, outside {folder}, a folder an attempt "
                    "could write: the governor follows no link an agent could have made "
                    "out of its own folders (replace the link by the file itself)"
                )
        current = target
    return None


def open_output(
    path: str | Path,
    *,
    append: bool = False,
    readable: bool = False,
    mode: int = 0o644,
    written: Written = (),
) -> tuple[int, bool]:
    """A descriptor to write ``path`` (see the module's rules) and whether this
    made it. An existing file is truncated unless ``append``. `NamedFileRefused`
    when ``path`` is a link, not a regular file, or reached through a link out
    of a folder in ``written``; any other `OSError` as the system says it."""
    why = link_out(os.path.dirname(os.fspath(path)) or ".", written)
    if why is not None:
        raise NamedFileRefused(path, why)
    access = os.O_RDWR if readable else os.O_WRONLY
    if append:
        access |= os.O_APPEND
    try:
        return os.open(path, access | os.O_CREAT | os.O_EXCL | _NOFOLLOW, mode), True
    except FileExistsError:
        pass
    try:
        fd = os.open(path, access | os.O_NONBLOCK | _NOFOLLOW)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise NamedFileRefused(path, _a_link(path)) from None
        if e.errno == errno.ENXIO:  # a FIFO nobody reads
            raise NamedFileRefused(path, _NOT_REGULAR) from None
        raise
    try:
        found = os.fstat(fd)
        if stat.S_ISCHR(found.st_mode):  # /dev/null, a terminal: no agent can make one
            os.set_blocking(fd, True)
            return fd, False
        if not stat.S_ISREG(found.st_mode):
            raise NamedFileRefused(path, _NOT_REGULAR)
        os.set_blocking(fd, True)
        if not append:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd, False


def _a_link(path: str | Path) -> str:
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return (
        f"it is a symbolic link (to {target}): the governor writes no file through a link, "
        "which an attempt may have left; remove it or name another file"
    )


def write_output(path: str | Path, text: str | bytes, *, written: Written = ()) -> None:
    """``text`` (UTF-8 when a string) written to ``path`` by `open_output`, all of it."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    fd, _ = open_output(path, written=written)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def read_input(path: str | Path, *, written: Written = ()) -> bytes:
    """The bytes of ``path``, a file the person named, read under `link_out`'s
    rule (`NamedFileRefused` naming the link), and only when it is a regular
    file (a FIFO an agent left would block the governor)."""
    why = link_out(path, written)
    if why is not None:
        raise NamedFileRefused(path, why)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NamedFileRefused(path, "it is not a regular file")
        os.set_blocking(fd, True)
        return f.read()


def read_input_text(path: str | Path, *, written: Written = ()) -> str:
    """`read_input` decoded as UTF-8 (a `UnicodeDecodeError` as the codec says it)."""
    return read_input(path, written=written).decode("utf-8")


__all__ = [
    "NamedFileRefused",
    "Written",
    "WrittenFolders",
    "link_out",
    "open_output",
    "read_input",
    "read_input_text",
    "write_output",
]
