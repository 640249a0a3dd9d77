"""A job's workspace: a fresh clone of its repository at its ref, and the diff
of what the attempt left there.

Rules of this file:

- **git is a subprocess we own**: `trio.run_process`, no terminal prompt
  (``GIT_TERMINAL_PROMPT=0``, stdin closed), a deadline, stderr kept for the
  reason when it fails.
- **The diff runs no code of the workspace's.** It is taken after the agent
  ran, in a repository the agent could write to; below full-access the
  sandbox keeps ``.git/config`` and ``.git/hooks`` read-only, and the diff
  also turns off hooks, the fsmonitor, external diff drivers and textconv,
  so that nothing the workspace names is executed by the governor.
- **No answers in the history.** The workspace holds the ref's commit and
  what it reaches, and nothing else: no later commit, no tag or branch, no
  reflog, stash, ``FETCH_HEAD`` or object of the source's that the ref does
  not reach, and no remote to fetch them from (``origin`` is `NOWHERE`). The repository is cloned
  bare into a scratch folder beside the workspace (removed however the clone
  ends), the ref resolved there, and the workspace made with ``git init``
  and a fetch of that one commit from the scratch copy: the pack protocol
  sends only what the commit reaches, where a local ``git clone`` would
  hard-link every object of the source, the unreachable ones included.
- **A repository the agent made inside is files, not a gitlink.** Before
  ``git add``, every ``.git`` below the workspace's own (a folder, a gitdir
  file or a link the agent made) is set aside beside the workspace
  (`set_aside_nested`): git would add the folder as a gitlink (the patch
  said ``Subproject commit ...`` and its files were lost from it), or, for
  one with no commit, fail ``git add`` and so the whole job's patch. Its
  files go in the patch as any others; its own git folder (config, hooks)
  never does, and no git of the governor's ever reads it.
- **The patch is bytes**: ``git diff --binary`` of everything against the
  ref's commit (new files included, ``.gitignore``d ones not), applied with
  ``git apply`` to a clone at the same ref. It is streamed, a chunk at a
  time, to whoever keeps it (`changes_into`), never held whole, and bounded:
  past ``most`` bytes git is stopped and `PatchTooLarge` raised.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import trio

from governor.boundary import folders
from governor.sandbox.host import processes

GIT_TIMEOUT: Final = 600.0
"""Seconds for one git command (a clone of a large repository over the network)."""

EMPTY_TREE: Final = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""git's empty tree: what a repository without commits is diffed against."""

NOWHERE: Final = "/dev/null/the-governor-removed-this-remote"
"""The clone's ``origin``: a path under a file, never a repository, so that a
``git fetch`` or ``git pull`` in the workspace fails saying so (with no remote
at all, a bare ``git fetch`` succeeds quietly, fetching nothing)."""

FETCH_ONE: Final = (
    "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
)  # fmt: skip
"""A fetch that brings what it is asked for and writes nothing else: no tag
followed, no ``FETCH_HEAD``, no submodule."""

SAFE: Final = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "diff.external=",
    "-c", "core.pager=cat",
)  # fmt: skip


_PASSWORD: Final = re.compile(r"(^[A-Za-z][A-Za-z0-9+.-]*://[^/:@]*):[^/@]*@")


def shown_url(url: str) -> str:
    """The URL with its password, if it holds one, as ``***``: what a message or
    an outcome may say of a repository (``https://me:TOKEN@host`` is a secret)."""
    return _PASSWORD.sub(r"\1:***@", url)


class GitFailed(Exception):
    """A git command failed; the message says which and git's own words."""


class PatchTooLarge(Exception):
    """The workspace's diff is over the bound it was taken with; the message says it."""


@dataclass(frozen=True, slots=True)
class Clone:
    """A workspace cloned at a commit."""

    path: Path
    commit: str
    """The commit ``ref`` named, or `EMPTY_TREE` for a repository with none."""


def _env() -> dict[str, str]:
    return {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false"}


async def git(*args: str, cwd: Path | None = None) -> str:
    """Run ``git ARGS``; its stdout, or `GitFailed` with its stderr's tail."""
    return (await git_bytes(*args, cwd=cwd)).decode(errors="replace")


async def git_bytes(*args: str, cwd: Path | None = None) -> bytes:
    """Like `git`, with stdout as bytes (a patch is not text). ``cwd`` is the
    repository git works in (``git -C``); the process itself starts from the
    governor's empty folder, through `governor.sandbox.host.processes`."""
    program = processes.find_program("git")
    if program is None:
        raise GitFailed("git could not be run: it is not installed in the system folders")
    where = () if cwd is None else ("-C", str(cwd))
    try:
        host = processes.command([program, *where, *SAFE, *args], env=_env())
        with trio.fail_after(GIT_TIMEOUT):
            done = await processes.run_async(host)
    except processes.HostProcessRefused as e:
        raise GitFailed(str(e)) from None
    except trio.TooSlowError:
        raise GitFailed(f"git {args[0]} took longer than {GIT_TIMEOUT:.0f} s") from None
    except OSError as e:
        raise GitFailed(f"git could not be run: {e.strerror}") from None
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise GitFailed(
            f"git {args[0]} exited {done.returncode}: {' / '.join(tail) or 'no output'}"
        )
    return bytes(done.stdout)


async def clone(repo: str, ref: str | None, into: Path) -> Clone:
    """Make ``into`` (which must not exist) a repository checked out detached at
    ``ref`` (default: the repository's HEAD) that holds nothing the ref does not
    reach and whose remote points nowhere (the file's rules: no answers in the history)."""
    scratch = Path(tempfile.mkdtemp(prefix=f".{into.name}-source-", dir=into.parent))
    try:
        source = scratch / "source.git"
        await git("clone", "--quiet", "--bare", "--", repo, str(source))
        commit = await _resolve(source, ref)
        await git("-c", "init.defaultBranch=governor", "init", "--quiet", "--", str(into))
        await git("remote", "add", "origin", NOWHERE, cwd=into)
        if commit is None:  # a repository without a commit: an empty workspace
            return Clone(into, EMPTY_TREE)
        # `ref` is the scratch copy's own: the fetch may want any commit of it
        await git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=source)
        await git(*FETCH_ONE, "--", str(source), commit, cwd=into)
        await git(
            "-c", "core.logAllRefUpdates=false",
            "checkout", "--quiet", "--detach", commit, "--",
            cwd=into,
        )  # fmt: skip
    finally:
        with trio.CancelScope(shield=True):  # removed even when the clone is cancelled
            await trio.to_thread.run_sync(
                functools.partial(shutil.rmtree, scratch, ignore_errors=True)
            )
    return Clone(into, commit)


async def _resolve(source: Path, ref: str | None) -> str | None:
    """The commit ``ref`` names in the bare clone ``source``; None for the HEAD
    of a repository without commits. A ref the clone did not bring (a pull
    request's) is fetched from its origin first."""
    target = ref or "HEAD"
    verify = ["rev-parse", "--verify", "--quiet", "--end-of-options"]
    try:
        return (await git(*verify, f"{target}^{{commit}}", cwd=source)).strip()
    except GitFailed:
        if ref is None:
            return None
    await git("fetch", "--quiet", "--no-tags", "origin", "--", ref, cwd=source)
    return (await git(*verify, "FETCH_HEAD^{commit}", cwd=source)).strip()


DIFF: Final = (
    "diff", "--cached", "--binary", "--full-index", "--no-color", "--no-ext-diff",
    "--no-textconv", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/",
)  # fmt: skip
CHUNK: Final = 1 << 16
STDERR_TAIL: Final = 4096


NESTED_ASIDE: Final = "nested-git"
"""The folder beside a job's workspace where `set_aside_nested` puts the ``.git``
entries of repositories the agent made inside it."""


def set_aside_nested(workspace: Path) -> list[str]:
    """Move every ``.git`` entry below ``workspace``'s own (folder, file or
    link: whatever makes git see a repository there) into `NESTED_ASIDE`
    beside it, without following links; their paths relative to the
    workspace. The workspace is the job's own clone, removed after the diff."""
    aside = workspace.parent / NESTED_ASIDE
    moved: list[str] = []
    for folder, dirs, files in os.walk(workspace):
        here = Path(folder)
        if here == workspace:
            dirs[:] = [d for d in dirs if d != ".git"]  # the workspace's own repository
            continue
        if ".git" in dirs or ".git" in files:
            aside.mkdir(mode=0o700, exist_ok=True)
            os.rename(here / ".git", aside / str(len(moved)))
            moved.append(os.path.relpath(here / ".git", workspace))
            dirs[:] = [d for d in dirs if d != ".git"]
    return moved


async def _add_all(path: Path) -> None:
    """``git add --all`` of the workspace, its nested repositories set aside first."""
    await trio.to_thread.run_sync(set_aside_nested, path)
    await git("add", "--all", "--", ".", cwd=path)


async def changes(workspace: Clone) -> bytes:
    """The workspace's diff against its commit, binary-safe: every change,
    committed or not, new untracked files included (ignored ones not)."""
    path = workspace.path
    # a folder the agent made unreadable is opened first, or git would skip it
    opening = await trio.to_thread.run_sync(folders.opened_tree, str(path))
    try:
        await _add_all(path)
        return await git_bytes(*DIFF, workspace.commit, "--", cwd=path)
    finally:
        opening.close()


async def changes_into(
    workspace: Clone, write: Callable[[bytes | bytearray], object], most: int
) -> int:
    """`changes`, handed to ``write`` a chunk at a time as git makes it (the
    caller's memory stays flat in the patch's size); its size in bytes.
    `PatchTooLarge` once it passes ``most`` bytes (git stopped, what was
    written is the caller's to throw away); `GitFailed` as `git`."""
    path = workspace.path
    opening = await trio.to_thread.run_sync(folders.opened_tree, str(path))  # as `changes`
    try:
        await _add_all(path)
        return await _diff_into(path, workspace.commit, write, most)
    finally:
        opening.close()


async def _diff_into(
    path: Path, commit: str, write: Callable[[bytes | bytearray], object], most: int
) -> int:
    """The streaming half of `changes_into`: ``git diff`` of the index against
    ``commit``, chunk by chunk into ``write``, git killed past ``most`` bytes."""
    program = processes.find_program("git")
    if program is None:
        raise GitFailed("git could not be run: it is not installed in the system folders")
    total = 0
    stderr = bytearray()
    stopped: Exception | None = None  # raised once git is gone
    try:  # through the host door, as every git of the governor's (`governor.sandbox.host.processes`)
        host = processes.command(
            [program, "-C", str(path), *SAFE, *DIFF, commit, "--"], env=_env()
        )
        process = await trio.lowlevel.open_process(
            list(host.argv), cwd=host.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=dict(host.env),
        )  # fmt: skip
    except processes.HostProcessRefused as e:
        raise GitFailed(str(e)) from None
    except OSError as e:
        raise GitFailed(f"git could not be run: {e.strerror}") from None
    assert process.stdout is not None and process.stderr is not None
    try:
        with trio.fail_after(GIT_TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_tail, process.stderr, stderr)
                while chunk := await process.stdout.receive_some(CHUNK):
                    total += len(chunk)
                    if total > most:
                        stopped = PatchTooLarge(f"over {most} bytes")
                    else:
                        try:
                            write(chunk)
                        except OSError as e:  # a full disk: the job's, named as such
                            stopped = GitFailed(f"the patch could not be written: {e.strerror}")
                    if stopped is not None:
                        process.kill()
                        break
            await process.wait()
    except trio.TooSlowError:
        raise GitFailed(f"git diff took longer than {GIT_TIMEOUT:.0f} s") from None
    finally:
        if process.returncode is None:  # cancelled, or too slow: never left running
            process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()
            await process.stdout.aclose()
            await process.stderr.aclose()
    if stopped is not None:
        raise stopped
    if process.returncode != 0:
        tail = stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise GitFailed(f"git diff exited {process.returncode}: {' / '.join(tail) or 'no output'}")
    return total


async def _tail(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
    """Read ``stream`` to its end, keeping its newest `STDERR_TAIL` bytes."""
    while data := await stream.receive_some(CHUNK):
        into += data
        del into[:-STDERR_TAIL]
