"""Held-out tests (``[sandbox] held_out``, ``governor run --held-out``, a batch
job's ``held_out``): tests the agent never sees, put back only for the checks.

A frozen test is read-only, but it is there to read: an agent can special-case
the inputs it asserts, or patch what it calls. A held-out test gives it nothing
to aim at. The mechanism is absence, not a mount: before the agent starts, the
paths the globs name are **moved out** of the roots into a governor-owned
folder under the state directory (`governor.sandbox.host.concealed.state_dir`, which no
sandbox shows: not the agent's, not its commands', not an MCP server's), so no
path, ``find /``, ``/proc`` entry or bind shows them; they are not in any
sandbox at all. After the agent (and every process it started) is gone, and
after the workspace diff and the tamper audit, they are **put back** in the
workspace for the checks, and stay there: the workspace ends as the loop wrote
it, plus the agent's work.

Rules of this file:

- **The checks see the original bytes.** Whatever the agent made at a
  held-out path (a file, a folder, a link, or a link in place of a folder on
  the way) is removed before the originals go back, and each such path is
  named (`Restored.replaced`, a notice and the outcome's ``held_out``). The
  way back never follows a link the agent left: every folder on the way is
  opened relative to its parent with ``O_NOFOLLOW``, and what is not a real
  folder is removed, so putting the files back cannot write outside the roots.
- **Every held-out test is an acceptance test**: the tests in the held-out
  files are listed (`governor.checks.test_results.collect`) before they are moved
  out (`HeldOut.tests`), and the verdict needs each reported passed by name.
  What a check run over them says (its output, its per-test report, the
  held-out tests' names) stays with the governor (`governor.checks.check_runs`): the
  outcome, the events and a next try's prompt count them, never show them.
- **Their digest at both ends**, like the frozen files' (`governor.confine.frozen.digest_of`):
  taken before they are moved out and again once they are back, in the
  attempt-start and attempt-end records and the outcome.
- **Git**: a held-out path git tracks is refused before start (`tracked`): its
  content is in the repository the agent reads (``git show HEAD:path``,
  ``git checkout``), and moving it out would show it deleted in ``git
  status``, a pointer to where to look. A loop writes its held-out tests after
  the checkout, untracked (an untracked file moved out leaves no trace in
  ``git status``); a test in a past commit only is not looked for.
- **Always put back**: the attempt puts them back in a ``finally``, whatever
  ends it (a refusal after the move, an interruption, an error); a governor
  killed outright leaves them in the folder the attempt-start record names.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from governor.checks import test_results
from governor.confine import frozen
from governor.policies.policy import Policy
from governor.sandbox.host import processes
from governor.sandbox.host.concealed import state_dir

GIT_TIMEOUT: Final = 30.0
"""Seconds ``git ls-files`` may take to say which held-out paths are tracked."""


class HoldOutFailed(Exception):
    """The held-out paths could not be moved out (the message names the path);
    the attempt does not start."""


@dataclass(frozen=True, slots=True)
class Kept:
    """One held-out path: its root, its path relative to the root, and where
    its original lies while the agent works."""

    root: str
    rel: str
    copy: str


@dataclass(slots=True)
class HeldOut:
    """The held-out paths of one attempt, moved out (`hide`) until `put_back`."""

    folder: Path
    kept: tuple[Kept, ...]
    at_start: frozen.Digest
    tests: tuple[str, ...] = ()
    """The tests in the held-out files, listed before they were moved out."""
    replaced: list[str] = field(default_factory=list)
    """The held-out paths (relative) where the agent had made something, removed
    before the original went back."""
    at_end: frozen.Digest | None = None
    back: bool = False

    def to_json(self) -> dict[str, Any]:
        """As the outcome's ``held_out`` holds it."""
        out: dict[str, Any] = {"start": self.at_start.to_json(), "tests": len(self.tests)}
        if self.at_end is not None:
            out["end"] = self.at_end.to_json()
        if self.replaced:
            out["replaced"] = list(self.replaced)
        return out


def tracked(policy: Policy) -> list[str]:
    """A problem for each held-out path of the bound ``policy`` that git tracks
    (in the index of the repository its root is in): see the module's header."""
    if not policy.held_out:
        return []
    git = processes.find_program("git")  # the host door's lookup: never the caller's PATH
    if git is None:
        return []
    problems = []
    by_root: dict[str, list[str]] = {}
    for path, rel in frozen.named(policy.held_out, policy.roots):
        by_root.setdefault(_root_of(path, rel), []).append(rel)
    for root, rels in by_root.items():
        argv = [git, "-C", root, "-c", "core.fsmonitor=false", "ls-files", "-z", "--cached"]
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": "/nonexistent",
        }
        try:
            host = processes.command([*argv, "--", *rels], env=env)
            done = processes.run(host, timeout=GIT_TIMEOUT, text=False)
        except (OSError, subprocess.SubprocessError, processes.HostProcessRefused):
            continue
        if done.returncode != 0:
            continue  # not a git work tree: nothing of it is in a repository
        out: Any = done.stdout  # bytes: run with text=False
        names = [n for n in bytes(out).decode("utf-8", "surrogateescape").split("\0") if n]
        if names:
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            problems.append(
                f"[sandbox] held_out: git tracks {shown} in {root}: a tracked file's content is "
                "in the repository the agent reads (git show, git checkout), so it cannot be "
                "held out; write held-out tests after the checkout, untracked"
            )
    return problems


def _root_of(path: str, rel: str) -> str:
    return path[: len(path) - len(rel)].rstrip("/") or "/"


def hide(policy: Policy, run_id: str) -> HeldOut | None:
    """Move the held-out paths of the bound ``policy`` out of its roots into a
    folder of their own under the state directory (None: nothing is held out).
    `HoldOutFailed` (what was moved already is put back) or
    `frozen.FrozenTooLarge` past the bounds."""
    if not policy.held_out:
        return None
    named = frozen.named(policy.held_out, policy.roots)
    if len(named) > frozen.MAX_PINS:
        raise frozen.FrozenTooLarge(
            f"the held-out globs name {len(named)} paths; at most {frozen.MAX_PINS} "
            "(hold out their folder instead: `dir/**`)"
        )
    at_start = frozen.digest_of(policy.held_out, policy.roots, "held-out")
    listed = test_results.collect(frozen.files_under(policy.held_out, policy.roots))
    folder = state_dir() / "held-out" / run_id
    try:
        folder.mkdir(parents=True, mode=0o700)
    except OSError as e:
        raise HoldOutFailed(
            f"the held-out tests cannot be kept in {folder}: {e.strerror}"
        ) from None
    held = HeldOut(folder, (), at_start, listed)
    kept: list[Kept] = []
    for n, (path, rel) in enumerate(named):
        copy = str(folder / str(n))
        try:
            shutil.move(path, copy)
        except (OSError, shutil.Error) as e:
            held.kept = tuple(kept)
            put_back(held, policy)
            raise HoldOutFailed(f"the held-out path {path} cannot be moved out: {e}") from None
        kept.append(Kept(_root_of(path, rel), rel, copy))
    held.kept = tuple(kept)
    return held


def put_back(held: HeldOut, policy: Policy) -> None:
    """Put every held-out original back in place (once), removing what the
    agent made there first, then take their digest; the folder is removed
    when every original is back."""
    if held.back:
        return
    held.back = True
    lost = False
    for one in held.kept:
        try:
            if _place(one):
                held.replaced.append(one.rel)
        except OSError:
            lost = True  # left in the folder, which the attempt-end record names
    with contextlib.suppress(frozen.FrozenTooLarge):
        held.at_end = frozen.digest_of(policy.held_out, policy.roots, "held-out")
    if not lost:
        shutil.rmtree(held.folder, ignore_errors=True)


def notices(held: HeldOut | None) -> list[str]:
    """What a loop must know of the held-out tests at the end."""
    if held is None:
        return []
    out = []
    if held.replaced:
        out.append(
            f"the agent made {', '.join(held.replaced[:5])} at held-out path(s); the checks "
            "ran the held-out originals in their place"
        )
    if held.at_end != held.at_start:
        out.append(
            "the held-out files the checks ran differ from those held out at the start "
            f"(some could not be put back: they are in {held.folder})"
        )
    return out


_OPEN_DIR: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _place(one: Kept) -> bool:
    """Put ``one`` back at its path, never following a link; True when something
    of the agent's was in the way (removed). A folder on the way the agent
    made unwritable or unlistable (the workspace root at 0555, as an
    unprivileged user) is made the owner's for the placing and given its
    mode back after: the originals go back whatever the agent did to modes,
    and the modes stay the agent's work."""
    parts = one.rel.split("/")
    replaced = False
    modes: list[tuple[int, int]] = []
    try:
        fd = os.open(one.root, _OPEN_DIR)
    except PermissionError:
        was = stat.S_IMODE(os.lstat(one.root).st_mode)
        os.chmod(one.root, was | stat.S_IRWXU)
        fd = os.open(one.root, _OPEN_DIR)
        modes.append((os.dup(fd), was))
    try:
        _writable(fd, modes)
        for part in parts[:-1]:
            child, was = _folder(fd, part, modes)
            replaced = replaced or was
            os.close(fd)
            fd = child
            _writable(fd, modes)
        name = parts[-1]
        if _exists(fd, name):
            _remove(fd, name)
            replaced = True
        _copy_in(one.copy, fd, name)
    finally:
        os.close(fd)
        for kept, mode in reversed(modes):
            with contextlib.suppress(OSError):
                os.fchmod(kept, mode)
            os.close(kept)
    return replaced


def _writable(fd: int, modes: list[tuple[int, int]]) -> None:
    """Give the owner every right on the open folder ``fd`` when it lacks one,
    noting its mode in ``modes`` (with a copy of ``fd``) to give back."""
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    if mode & stat.S_IRWXU != stat.S_IRWXU:
        modes.append((os.dup(fd), mode))
        os.fchmod(fd, mode | stat.S_IRWXU)


def _folder(fd: int, name: str, modes: list[tuple[int, int]]) -> tuple[int, bool]:
    """The folder ``name`` under ``fd``, opened; made when missing, and made
    anew (True) when something else (a link, a file) is there; one the owner
    cannot open (mode 0311) opened after its rights are given (its mode in
    ``modes``)."""
    try:
        return os.open(name, _OPEN_DIR, dir_fd=fd), False
    except FileNotFoundError:
        os.mkdir(name, 0o755, dir_fd=fd)
        return os.open(name, _OPEN_DIR, dir_fd=fd), False
    except PermissionError:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            os.chmod(name, stat.S_IMODE(st.st_mode) | stat.S_IRWXU, dir_fd=fd, follow_symlinks=False)
            child = os.open(name, _OPEN_DIR, dir_fd=fd)
            modes.append((os.dup(child), stat.S_IMODE(st.st_mode)))
            return child, False
    except OSError as e:
        if e.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
    _remove(fd, name)
    os.mkdir(name, 0o755, dir_fd=fd)
    return os.open(name, _OPEN_DIR, dir_fd=fd), True


def _exists(fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _remove(fd: int, name: str) -> None:
    """Remove ``name`` under ``fd``: a link or a file itself, a folder with all
    it holds (folders the agent made unwritable made ours first)."""
    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=fd)
        return
    os.chmod(name, stat.S_IRWXU, dir_fd=fd, follow_symlinks=False)
    inner = os.open(name, _OPEN_DIR, dir_fd=fd)
    try:
        for entry in os.listdir(inner):
            _remove(inner, entry)
    finally:
        os.close(inner)
    os.rmdir(name, dir_fd=fd)


def _copy_in(source: str, fd: int, name: str) -> None:
    """Copy ``source`` (a file, a link or a folder, ours) to ``name`` under
    ``fd``, made new (``O_EXCL``), modes kept."""
    st = os.lstat(source)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(source), name, dir_fd=fd)
    elif stat.S_ISDIR(st.st_mode):
        os.mkdir(name, 0o700, dir_fd=fd)
        inner = os.open(name, _OPEN_DIR, dir_fd=fd)
        try:
            for entry in sorted(os.listdir(source)):
                _copy_in(os.path.join(source, entry), inner, entry)
            os.fchmod(inner, stat.S_IMODE(st.st_mode))
        finally:
            os.close(inner)
    elif stat.S_ISREG(st.st_mode):
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        out = os.open(name, flags, 0o600, dir_fd=fd)
        try:
            with open(source, "rb") as f:
                while chunk := f.read(1 << 20):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(out, view) :]
            os.fchmod(out, stat.S_IMODE(st.st_mode))
        finally:
            os.close(out)
