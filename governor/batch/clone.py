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
- **The patch is bytes**: ``git diff --binary`` of everything against the
  ref's commit (new files included, ``.gitignore``d ones not), applied with
  ``git apply`` to a clone at the same ref.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import trio

GIT_TIMEOUT: Final = 600.0
"""Seconds for one git command (a clone of a large repository over the network)."""

EMPTY_TREE: Final = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""git's empty tree: what a repository without commits is diffed against."""

SAFE: Final = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "diff.external=",
    "-c", "core.pager=cat",
)  # fmt: skip


class GitFailed(Exception):
    """A git command failed; the message says which and git's own words."""


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
    """Like `git`, with stdout as bytes (a patch is not text)."""
    try:
        with trio.fail_after(GIT_TIMEOUT):
            done = await trio.run_process(
                ["git", *SAFE, *args],
                cwd=cwd,
                stdin=b"",
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                env=_env(),
            )
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
    """Clone ``repo`` into ``into`` (which must not exist) and check out ``ref``
    (default: the repository's HEAD) detached."""
    await git("clone", "--quiet", "--no-checkout", "--", repo, str(into))
    target = ref or "HEAD"
    try:
        commit = (
            await git(
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                f"{target}^{{commit}}",
                cwd=into,
            )
        ).strip()
    except GitFailed:
        if ref is None:  # a repository without a commit: an empty workspace
            return Clone(into, EMPTY_TREE)
        # a ref the clone's default refspec does not bring (a pull request's, a bare sha)
        await git("fetch", "--quiet", "origin", ref, cwd=into)
        commit = (await git("rev-parse", "--verify", "FETCH_HEAD^{commit}", cwd=into)).strip()
    await git("checkout", "--quiet", "--detach", commit, "--", cwd=into)
    return Clone(into, commit)


async def changes(workspace: Clone) -> bytes:
    """The workspace's diff against its commit, binary-safe: every change,
    committed or not, new untracked files included (ignored ones not)."""
    path = workspace.path
    await git("add", "--all", "--", ".", cwd=path)
    argv = [
        "diff", "--cached", "--binary", "--full-index", "--no-color", "--no-ext-diff",
        "--no-textconv", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/",
        workspace.commit, "--",
    ]  # fmt: skip
    return await git_bytes(*argv, cwd=path)
