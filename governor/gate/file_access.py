"""Governed file reads and writes, done by the governor itself on the host.

``fs/read_text_file`` and ``fs/write_text_file`` never go through bwrap, so the
same boundary the sandbox gives commands is enforced here, in-process:

- the path is resolved (symlinks followed) *before* the policy decides, so a
  symlink inside the workspace pointing outside is judged by where it points;
- the write itself opens every directory component with ``O_NOFOLLOW`` relative
  to its parent (``openat``-style walk), so a symlink swapped in between the
  decision and the write cannot redirect it (TOCTOU);
- the write is atomic: a temporary file in the same directory, fsynced, then
  renamed over the target; a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path
from typing import Final


class FileAccessError(Exception):
    """A read or write that cannot be done; ``code`` is the JSON-RPC error code."""

    def __init__(self, code: int, message: str) -> None:
        self.code = code
        super().__init__(message)


RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602
INTERNAL = -32603


def resolve(path: str) -> str:
    """The absolute path with every existing symlink followed (the file may not exist)."""
    if not path or "\0" in path:
        raise FileAccessError(
            INVALID_PARAMS, "path: must be a non-empty absolute path without NUL bytes"
        )
    if not path.startswith("/"):
        raise FileAccessError(
            INVALID_PARAMS, f"path: {path!r} is not absolute (ACP paths are absolute)"
        )
    try:
        # The kernel resolves the whole path in one call (O_PATH opens nothing:
        # no FIFO blocks, no device reacts); /proc names what it resolved to.
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:  # missing (it may be created), or not searchable
        return os.path.realpath(path)
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no /proc
        real = ""
    finally:
        os.close(fd)
    if not real.startswith("/") or real.endswith(" (deleted)"):
        return os.path.realpath(path)
    return real


def read_text(
    path: str, line: int | None = None, limit: int | None = None, max_bytes: int = 64 * 2**20
) -> str:
    """A file's text, from 1-based ``line`` for at most ``limit`` lines."""
    opened = open_text(path, line, limit)
    return read_opened(opened, line, limit, max_bytes)


class Opened:
    """A file opened for `read_opened`: its descriptor, path and size (from fstat)."""

    __slots__ = ("fd", "path", "size")

    def __init__(self, fd: int, path: str, size: int) -> None:
        self.fd = fd
        self.path = path
        self.size = size

    def close(self) -> None:
        """Close the file (again: nothing)."""
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)


def open_text(path: str, line: int | None = None, limit: int | None = None) -> Opened:
    """Open a regular file for reading (``line`` and ``limit`` are checked first);
    `read_opened` reads and closes it."""
    if line is not None and line < 1:
        raise FileAccessError(INVALID_PARAMS, f"line: must be 1 or more, got {line}")
    if limit is not None and limit < 0:
        raise FileAccessError(INVALID_PARAMS, f"limit: must be 0 or more, got {limit}")
    try:
        # O_NONBLOCK: a FIFO would otherwise block the governor until a writer came.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise FileAccessError(RESOURCE_NOT_FOUND, f"no such file: {path}") from None
    except OSError as e:
        raise FileAccessError(_code(e), f"cannot read {path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileAccessError(INVALID_PARAMS, f"{path} is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return Opened(fd, path, st.st_size)


def read_opened(
    opened: Opened, line: int | None = None, limit: int | None = None, max_bytes: int = 64 * 2**20
) -> str:
    """The text of a file `open_text` opened (closing it), from 1-based ``line`` for
    at most ``limit`` lines."""
    fd, path = opened.fd, opened.path
    if fd < 0:
        raise ValueError(f"{path} was closed before it was read")
    try:
        # Sized from fstat: reading with a max_bytes buffer would allocate 64 MiB
        # for every small file (the read path is hot).
        chunks: list[bytes] = []
        total = 0
        want = min(opened.size, max_bytes) + 1  # one byte more tells a file that grew too big
        while total <= max_bytes:
            asked = max(want - total, 65536)
            chunk = os.read(fd, asked)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if len(chunk) < asked and total >= opened.size > 0:
                # A short read past the size fstat gave: the end, without a read for
                # b"". Not for a file that says it is empty (/proc gives one page a read).
                break
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        opened.close()
    if len(data) > max_bytes:
        raise FileAccessError(
            INVALID_PARAMS, f"{path} is larger than the read limit of {max_bytes} bytes"
        )
    text = data.decode("utf-8", errors="replace")
    if line is None and limit is None:
        return text
    lines = text.splitlines(keepends=True)
    start = (line or 1) - 1
    end = None if limit is None else start + limit
    return "".join(lines[start:end])


NOT_KEPT: Final = "\0not kept"
"""`write_text`'s word for a previous content it did not keep (not a regular
file, over the bound, not text): distinct from None, no file before."""


def write_text(path: str, content: str, *, before: int = 0) -> str | None:
    """Write atomically, refusing any symlink on the way (component by component).

    With ``before`` > 0, the file's previous text is returned when it was a
    regular UTF-8 file of at most ``before`` bytes (read through the same
    directory descriptors, the leaf with ``O_NOFOLLOW``, so the read follows no
    link the write would refuse), None when there was no file, `NOT_KEPT`
    otherwise: what a diff of the write needs."""
    parts = Path(path).parts
    if len(parts) < 2:
        raise FileAccessError(INVALID_PARAMS, f"cannot write {path}")
    data = content.encode("utf-8")
    dir_fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[1:-1]:
            try:
                next_fd = os.open(
                    name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd
                )
            except FileNotFoundError:
                os.mkdir(name, 0o755, dir_fd=dir_fd)
                next_fd = os.open(
                    name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd
                )
            os.close(dir_fd)
            dir_fd = next_fd
        leaf = parts[-1]
        previous: str | None = None
        try:
            st = os.stat(leaf, dir_fd=dir_fd, follow_symlinks=False)
            mode = st.st_mode & 0o7777
            if stat.S_ISLNK(st.st_mode):
                raise FileAccessError(
                    INVALID_PARAMS,
                    f"{path} is a symlink; the governor does not write through symlinks",
                )
            if before > 0:
                previous = _previous(leaf, dir_fd, st, before)
        except FileNotFoundError:
            mode = 0o644
        tmp = f".{leaf}.governor-{secrets.token_hex(4)}.tmp"
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            mode,
            dir_fd=dir_fd,
        )
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, leaf, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
        return previous
    except FileAccessError:
        raise
    except OSError as e:
        if e.errno == errno.ELOOP or e.errno == errno.ENOTDIR:
            raise FileAccessError(
                INVALID_PARAMS, f"{path}: a component is a symlink or not a directory; refused"
            ) from None
        raise FileAccessError(_code(e), f"cannot write {path}: {e.strerror}") from None
    finally:
        os.close(dir_fd)


def _previous(leaf: str, dir_fd: int, st: os.stat_result, most: int) -> str:
    """A regular file's text of at most ``most`` bytes, else `NOT_KEPT`."""
    if not stat.S_ISREG(st.st_mode) or st.st_size > most:
        return NOT_KEPT
    try:
        fd = os.open(leaf, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return NOT_KEPT
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return NOT_KEPT
        data = f.read(most + 1)
    if len(data) > most:
        return NOT_KEPT
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return NOT_KEPT


def _code(e: OSError) -> int:
    return RESOURCE_NOT_FOUND if e.errno == errno.ENOENT else INTERNAL
