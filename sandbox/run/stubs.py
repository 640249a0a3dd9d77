"""Placeholders for protected paths that do not exist yet, counted per process.

A missing ``.claude`` or ``.vscode`` in a writable workspace must still be
unwritable, and a mount needs a host-side mount point, so the launcher creates
a read-only file at the first missing component and pins it. Left behind, those
files are litter (claude-code#25603, srt#139), so they are deleted afterwards.

A placeholder must read as "nothing here" to whatever reads that name, or it
changes what an agent sees: most are empty, a ``*.json`` one holds ``{}`` (an
empty ``.mcp.json`` made Qwen Code warn "Unexpected end of JSON input") and a
git dir's ``commondir`` holds ``.`` (git dies on an empty one); the table is
`governor.sandbox.standalone.sweeper.placeholder`. Whatever decides that a file is still our stub
(before deleting or reusing it) checks that it holds exactly that content.

Why a count and not "delete when the command ends": since Linux 3.18, unlinking
a file that is a mount point in *another* mount namespace succeeds and silently
detaches that mount there. If command A deleted its stub while the agent's
long-lived sandbox (or a concurrent command B) still relied on the same stub,
the protection would vanish mid-run. So a stub is deleted only when the last
sandbox of this process that uses it has ended, and only if it is still the
regular file we created (same device and inode, the placeholder's content). Limit: another governor
*process* sharing the workspace does not see our counts (sealed stubs, below,
do: they are counted across processes by their file locks).

Sealed stubs (when the governor holds ``CAP_LINUX_IMMUTABLE``, i.e. runs as
root outside a container that drops it): the stub is made immutable
(``chattr +i``). Nothing without that capability in the *initial* user
namespace can then unlink, rename, replace, write, chmod or link it, which is
exactly what the read-only pin mount guaranteed; a sandbox has no capability at
all, so such a stub needs no mount. Why bother: each bwrap bind re-reads the
whole mount table (``/proc/self/mountinfo``, line by line), so the ~27
pins of a workspace's missing names were most of a small command's sandbox cost
(bench/sandbox.py). The hazards and what answers them:

* Who relies on a sealed stub is known to the kernel, across processes: every
  governor that uses one holds a shared ``flock`` on it, and every sandbox that
  relies on it holds a POSIX read lock on it (bwrap ``--lock-file``, taken by
  the sandbox's pid 1, so it lasts exactly as long as the sandbox). A stub is
  unsealed and deleted only when neither kind of lock is held by anyone else.
* An immutable file left behind (governor SIGKILLed) would be litter nobody can
  ``rm``. So the first seal starts a *sweeper*: a small process in its own
  session that is told every sealed stub over a pipe and, when that pipe closes
  without the stub having been deleted (the governor died), waits `SWEEP_GRACE`
  (bwrap's ``--die-with-parent`` ends the sandboxes meanwhile), then for the
  sandbox locks to go, and deletes what is still ours. Sealed stubs also carry
  the ``trusted.acp-governor.stub`` attribute (only ``CAP_SYS_ADMIN`` can set
  it): a later governor that finds one takes a share of it (`StubLedger.adopt`)
  instead of treating it as a user's file, so even a sweeper killed too leaves
  nothing for good once a governor runs there again.
* Sealing can fail (no capability, a filesystem without the flag or the
  attribute): the stub then stays a plain one and is pinned by mount.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import IO, Final, TypeVar

from governor.sandbox.plan.profile import ProfileError
from governor.sandbox.standalone import sweeper
from governor.sandbox.standalone.sweeper import (
    FS_IMMUTABLE_FL,
    SEAL_MARK,
    get_flags,
    holds_placeholder,
    placeholder,
    set_flags,
)

LINGER: Final = 1.0
"""Seconds a release waits for a sandbox that has been reaped but whose pid 1
is still exiting (it holds its lock on the stub until its files are closed):
a library caller may delete or reuse the workspace as soon as we return."""
SWEEP_GRACE: Final = 10.0
"""Seconds the sweeper waits after its governor died before it looks at the
sandbox locks: a sandbox still in bwrap's setup (its lock not yet taken) has
been orphaned or killed well within that."""


@dataclass
class _Held:
    count: int
    dev: int
    ino: int
    seal_fd: int | None = None
    """Open read-only descriptor of a sealed stub, holding a shared ``flock``."""
    checked: bool = False
    """`acquire` has just seen this inode at its path (`sealed` need not look again)."""


class StubLedger:
    """Creates, shares and finally removes the stubs of this process.

    A *hold* (a session: the ACP terminals of one attempt, an agent sandbox)
    keeps unused stubs parked on disk instead of deleting and re-creating them
    for every command; they are deleted when the last hold that covers them
    ends. A hold covers the roots it names (every path when it names none):
    two attempts at once in one process (a batch) must not keep each other's
    stubs, or the first to end would find them in its workspace as changes. ``seal=False``
    never seals (plain stubs, each pinned by a mount).
    """

    def __init__(self, *, seal: bool = True) -> None:
        self._held: dict[str, _Held] = {}
        self._parked: dict[str, _Held] = {}
        self._holds: list[tuple[str, ...]] = []
        """Each open hold's roots (with a trailing ``/``); an empty one covers every path."""
        self._seal = seal
        self._unsealable: set[int] = set()  # devices where sealing failed once
        self._lingering: dict[str, _Held] = {}  # sealed, still locked by a sandbox

    def owns(self, path: str) -> bool:
        """Whether ``path`` is a stub this process created and has not deleted."""
        return path in self._held or path in self._parked

    def sealed(self, path: str) -> bool:
        """Whether ``path`` is a stub we hold that is still sealed (immutable, same
        inode at that path): such a stub needs no pin mount. Checked live."""
        held = self._held.get(path)
        if held is None or held.seal_fd is None:
            return False
        checked, held.checked = held.checked, False
        try:
            if not checked:
                st = os.lstat(path)
                if (st.st_dev, st.st_ino) != (held.dev, held.ino):
                    return False
            return bool(get_flags(held.seal_fd) & FS_IMMUTABLE_FL)
        except OSError:
            return False

    def acquire(self, path: str) -> bool:
        """Make sure ``path`` exists; True when it is (now) one of our stubs and
        must be `release`d, False when something else already exists there."""
        held = self._held.get(path)
        if held is not None:
            held.count, held.checked = held.count + 1, False
            return True
        parked = self._parked.pop(path, None)
        if parked is not None:
            if self._still_ours(path, parked):
                parked.count, parked.checked = 1, True
                self._held[path] = parked
                return True
            _close(parked.seal_fd)
        try:
            fd = _in_locked_folder(path, _create)
        except FileExistsError:
            return self.adopt(path)
        except OSError as exc:
            raise ProfileError(
                f"cannot create the placeholder that protects missing path {path}: {exc.strerror}"
            ) from None
        try:
            st = os.fstat(fd)
            _write_all(fd, placeholder(path))
        except OSError as exc:
            os.close(fd)
            with suppress(OSError):
                os.unlink(path)
            raise ProfileError(
                f"cannot write the placeholder that protects missing path {path}: {exc.strerror}"
            ) from None
        os.close(fd)
        held = _Held(1, st.st_dev, st.st_ino)
        if self._seal and st.st_dev not in self._unsealable:
            held.seal_fd = _seal(path, held)
            if held.seal_fd is None:
                self._unsealable.add(st.st_dev)
            else:
                _SWEEPER.tell("+", path, held)
        self._held[path] = held
        return True

    def adopt(self, path: str) -> bool:
        """Take a share of a sealed stub that another governor made (still running,
        or dead and left it behind); True when it is now ours to `release` too."""
        if self.owns(path):
            return self.acquire(path)
        fd = _open_sealed_stub(path)
        if fd is None:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            st = os.fstat(fd)
            here = os.lstat(path)
        except OSError:  # being deleted by its last owner, or gone
            os.close(fd)
            return False
        if (here.st_dev, here.st_ino) != (st.st_dev, st.st_ino):
            os.close(fd)
            return False
        held = self._held[path] = _Held(1, st.st_dev, st.st_ino, fd)
        _SWEEPER.tell("+", path, held)
        return True

    def commit(self) -> None:
        """Tell the sweeper about the stubs sealed or taken over so far; call it
        before a sandbox that relies on them starts."""
        self._retry_lingering()
        _SWEEPER.flush()

    def release(self, path: str) -> None:
        """Drop one use; the last one deletes the stub (or parks it during a hold)."""
        held = self._held.get(path)
        if held is None:
            return
        held.count, held.checked = held.count - 1, False
        if held.count > 0:
            return
        del self._held[path]
        if self._covered(path):
            self._parked[path] = held
        else:
            self._delete(path, held, time.monotonic() + LINGER)

    @contextmanager
    def hold(self, roots: Iterable[str | os.PathLike[str]] = ()) -> Iterator[None]:
        """Keep the stubs under ``roots`` (default: every stub) between commands
        until the block ends."""
        scope = tuple(os.path.join(os.path.abspath(r), "") for r in roots)
        self._holds.append(scope)
        try:
            yield
        finally:
            self._holds.remove(scope)
            done = [p for p in self._parked if not self._covered(p)]
            if done:
                deadline = time.monotonic() + LINGER
                for path in done:
                    self._delete(path, self._parked.pop(path), deadline)
            self._retry_lingering()
            _SWEEPER.flush()

    def _covered(self, path: str) -> bool:
        """Whether an open hold keeps ``path`` parked when it is not in use."""
        return any(not scope or path.startswith(scope) for scope in self._holds)

    def held(self) -> dict[str, int]:
        """Path -> use count (for tests and diagnostics); parked stubs count 0."""
        return {**{path: 0 for path in self._parked}, **{p: h.count for p, h in self._held.items()}}

    def release_all(self) -> None:
        """Remove every stub regardless of counts (process exit)."""
        everything = {**self._parked, **self._held}
        self._parked, self._held = {}, {}
        deadline = time.monotonic() + LINGER
        for path, held in everything.items():
            self._delete(path, held, deadline)
        self._retry_lingering()
        _SWEEPER.flush()

    @staticmethod
    def _still_ours(path: str, held: _Held) -> bool:
        """Whether ``path`` is still the stub ``held``: the same inode, holding
        exactly the placeholder's content (a person's file is never deleted)."""
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if (st.st_dev, st.st_ino) != (held.dev, held.ino) or not stat.S_ISREG(st.st_mode):
            return False
        if st.st_size != len(placeholder(path)):
            return False
        if st.st_size == 0:
            return True  # nothing to read: the common case costs one lstat
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            here = os.fstat(fd)
            return (here.st_dev, here.st_ino) == (held.dev, held.ino) and holds_placeholder(
                fd, path, here
            )
        except OSError:
            return False
        finally:
            os.close(fd)

    def _delete(self, path: str, held: _Held, deadline: float) -> None:
        """Delete our stub; a sealed one still locked by a sandbox is waited for
        until ``deadline`` (one per batch), then left to `_retry_lingering`."""
        if held.seal_fd is not None:
            fd, held.seal_fd = held.seal_fd, None
            result = sweeper.unseal_and_delete(path, held.dev, held.ino, fd)
            while result == "in use" and time.monotonic() < deadline:
                time.sleep(0.002)  # a reaped sandbox's pid 1, still exiting
                result = sweeper.unseal_and_delete(path, held.dev, held.ino)
            if result == "deleted":
                _SWEEPER.tell("-", path, held)
            elif result == "in use":
                self._lingering[path] = held  # retried later, and by the sweeper
            # "not ours": another governor relies on it now and deletes it last
        elif self._still_ours(path, held):
            with suppress(OSError):
                _unlink(path)

    def _retry_lingering(self) -> None:
        """One more try (no waiting) at each sealed stub a sandbox still held."""
        for path, held in list(self._lingering.items()):
            result = sweeper.unseal_and_delete(path, held.dev, held.ino)
            if result != "in use":
                del self._lingering[path]
            if result == "deleted":
                _SWEEPER.tell("-", path, held)


_T = TypeVar("_T")


def _create(name: str, folder: int) -> int:
    return os.open(
        name,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o444,
        dir_fd=folder,
    )


def _unlink(path: str) -> None:
    _in_locked_folder(path, lambda name, folder: os.unlink(name, dir_fd=folder))


def _in_locked_folder(path: str, act: Callable[[str, int], _T]) -> _T:
    """``act(name, folder fd)`` on ``path`` (create or unlink our stub), even in
    a folder the agent made unwritable (the workspace root at 0555, as an
    unprivileged user): on a refusal the folder's owner (the user, whose
    workspace it is) gets write for the one act and its mode back at once,
    so no check is kept from starting and no placeholder is left behind
    where the agent locked the folder. Not the owner: the refusal stands."""
    folder = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    name = os.path.basename(path)
    try:
        try:
            return act(name, folder)
        except PermissionError:
            mode = stat.S_IMODE(os.stat(folder).st_mode)
            if mode & stat.S_IWUSR and mode & stat.S_IXUSR:
                raise
            os.chmod(f"/proc/self/fd/{folder}", mode | stat.S_IWUSR | stat.S_IXUSR)
            try:
                return act(name, folder)
            finally:
                os.chmod(f"/proc/self/fd/{folder}", mode)
    finally:
        os.close(folder)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _close(fd: int | None) -> None:
    if fd is not None:
        with suppress(OSError):
            os.close(fd)


def _seal(path: str, held: _Held) -> int | None:
    """Mark, lock and make immutable the stub we just created; the locked
    descriptor, or None (a plain stub) when any step is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (held.dev, held.ino):
            raise OSError("replaced")
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        os.setxattr(fd, SEAL_MARK, b"1")
        set_flags(fd, get_flags(fd) | FS_IMMUTABLE_FL)
    except OSError:
        with suppress(OSError):
            os.removexattr(fd, SEAL_MARK)
        os.close(fd)
        return None
    return fd


def _open_sealed_stub(path: str) -> int | None:
    """A read-only descriptor of ``path`` if it is a sealed stub of a governor:
    a regular file holding the placeholder's content, immutable, carrying
    `SEAL_MARK`; else None."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(placeholder(path)):
            return None
        real = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        again = os.fstat(real)
        if (
            (again.st_dev, again.st_ino) == (st.st_dev, st.st_ino)
            and holds_placeholder(real, path, again)
            and get_flags(real) & FS_IMMUTABLE_FL
            and os.getxattr(real, SEAL_MARK)
        ):
            return real
    except OSError:
        pass
    os.close(real)
    return None


class _Sweeper:
    """This process's sweeper (see `governor.sandbox.standalone.sweeper`), started at the first seal.

    Lines are buffered and sent by `flush`, which `StubLedger.commit` calls
    before any sandbox relies on a stub: one write (one wake-up of the sweeper)
    per launch, not one per stub. A deletion not sent yet costs nothing if we
    die: the sweeper then finds the stub gone.
    """

    def __init__(self) -> None:
        self._pipe: IO[bytes] | None = None
        self._pid = 0
        self._pending: list[bytes] = []

    def tell(self, op: str, path: str, held: _Held) -> None:
        self._pending.append(json.dumps([op, path, held.dev, held.ino]).encode() + b"\n")

    def flush(self) -> None:
        if not self._pending:
            return
        lines, self._pending = b"".join(self._pending), []
        try:
            if self._pipe is None or self._pid != os.getpid():
                self._start()
            assert self._pipe is not None
            self._pipe.write(lines)
            self._pipe.flush()
        except (OSError, subprocess.SubprocessError):
            # No sweeper (it died, or cannot start): the stubs stay protected;
            # only a crash would now leave them behind, for the next governor
            # there to take over. Try again next time.
            self._pipe = None

    def _start(self) -> None:
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", sweeper.__file__, str(SWEEP_GRACE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            start_new_session=True,  # outlives a kill of the governor's process group
        )
        self._pipe, self._pid = process.stdin, os.getpid()
        process.returncode = 0  # never waited for: it outlives us by design (no ResourceWarning)


_SWEEPER = _Sweeper()


LEDGER = StubLedger()
atexit.register(LEDGER.release_all)
