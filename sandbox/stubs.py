"""Placeholders for protected paths that do not exist yet, counted per process.

A missing ``.claude`` or ``.vscode`` in a writable workspace must still be
unwritable, and a mount needs a host-side mount point, so the launcher creates
an empty, read-only file at the first missing component and pins it. Left
behind, those 0-byte files are litter (claude-code#25603, srt#139), so they are
deleted afterwards.

Why a count and not "delete when the command ends": since Linux 3.18, unlinking
a file that is a mount point in *another* mount namespace succeeds and silently
detaches that mount there. If command A deleted its stub while the agent's
long-lived sandbox (or a concurrent command B) still relied on the same stub,
the protection would vanish mid-run. So a stub is deleted only when the last
sandbox of this process that uses it has ended, and only if it is still the
empty regular file we created (same device and inode). Limit: another governor
*process* sharing the workspace does not see our counts.
"""

from __future__ import annotations

import atexit
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from sandbox.profile import ProfileError


@dataclass
class _Held:
    count: int
    dev: int
    ino: int


class StubLedger:
    """Creates, shares and finally removes the stubs of this process.

    A *hold* (a session: the ACP terminals of one attempt, an agent sandbox)
    keeps unused stubs parked on disk instead of deleting and re-creating them
    for every command; they are deleted when the last hold ends.
    """

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}
        self._parked: dict[str, _Held] = {}
        self._holds = 0

    def owns(self, path: str) -> bool:
        """Whether ``path`` is a stub this process created and has not deleted."""
        return path in self._held or path in self._parked

    def acquire(self, path: str) -> bool:
        """Make sure ``path`` exists; True when it is (now) one of our stubs and
        must be `release`d, False when something else already exists there."""
        held = self._held.get(path)
        if held is not None:
            held.count += 1
            return True
        parked = self._parked.pop(path, None)
        if parked is not None and self._still_ours(path, parked):
            parked.count = 1
            self._held[path] = parked
            return True
        try:
            fd = os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o444
            )
        except FileExistsError:
            return False
        except OSError as exc:
            raise ProfileError(
                f"cannot create the placeholder that protects missing path {path}: {exc.strerror}"
            ) from None
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        self._held[path] = _Held(1, st.st_dev, st.st_ino)
        return True

    def release(self, path: str) -> None:
        """Drop one use; the last one deletes the stub (or parks it during a hold)."""
        held = self._held.get(path)
        if held is None:
            return
        held.count -= 1
        if held.count > 0:
            return
        del self._held[path]
        if self._holds > 0:
            self._parked[path] = held
        else:
            self._delete(path, held)

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Keep stubs between commands until the block ends."""
        self._holds += 1
        try:
            yield
        finally:
            self._holds -= 1
            if self._holds == 0:
                parked, self._parked = self._parked, {}
                for path, held in parked.items():
                    self._delete(path, held)

    def held(self) -> dict[str, int]:
        """Path -> use count (for tests and diagnostics); parked stubs count 0."""
        return {**{path: 0 for path in self._parked}, **{p: h.count for p, h in self._held.items()}}

    def release_all(self) -> None:
        """Remove every stub regardless of counts (process exit)."""
        everything = {**self._parked, **self._held}
        self._parked, self._held = {}, {}
        for path, held in everything.items():
            self._delete(path, held)

    @staticmethod
    def _still_ours(path: str, held: _Held) -> bool:
        try:
            st = os.lstat(path)
        except OSError:
            return False
        return (
            stat.S_ISREG(st.st_mode)
            and st.st_size == 0
            and (st.st_dev, st.st_ino) == (held.dev, held.ino)
        )

    def _delete(self, path: str, held: _Held) -> None:
        if self._still_ours(path, held):
            with suppress(OSError):
                os.unlink(path)


LEDGER = StubLedger()
atexit.register(LEDGER.release_all)
