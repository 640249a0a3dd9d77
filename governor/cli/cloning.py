"""`governor run --clone URL@REF`: the attempt's workspace, a fresh clone made
the way a batch job's is (`governor.batch.clone`: the ref's history and
nothing after it, a remote that points nowhere).

Rules of this file:

- **Where the workspace goes**: ``--workspace DIR`` when given (a folder that
  does not exist yet, or an empty one), else a new folder of the attempt's
  own under the governor's folder for attempts (`governor.confine.attempt_folders`,
  as the batch's workspaces: hidden from every other attempt's sandbox,
  whatever ``TMPDIR`` is), named after the repository. It is kept after the attempt, for the person to read; its
  path is printed on stderr before the agent starts. A refusal before start
  removes it again: nothing ran there.
- **URL@REF** splits at the last ``@``, unless what follows cannot be a ref (it
  holds a ``:``, as in ``git@host:org/repo``) or what precedes is only a URL's
  scheme and user (``https://user@host/repo``): then the whole is the URL and
  the ref the repository's HEAD. ``URL@HEAD`` says so explicitly.
- **A URL's password never reaches the terminal**: ``https://user:token@host``
  is shown as ``https://user:***@host``, in the line printed and in git's
  words when the clone fails.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import trio

from governor.batch.clone import GitFailed, clone
from governor.batch.clone import shown_url as shown
from governor.confine.attempt_folders import NoAttemptFolder, attempt_folder
from governor.job.spec import RefusedBeforeStart

_AUTHORITY_ONLY: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/]*$")
"""What precedes an ``@`` that belongs to the URL itself: a scheme and a user."""


def split(value: str) -> tuple[str, str | None]:
    """``URL@REF`` as (URL, REF); REF None for the repository's HEAD. `ValueError`
    naming what is wrong."""
    url, at, ref = value.rpartition("@")
    if not at or ":" in ref or _AUTHORITY_ONLY.match(url):
        url, ref = value, ""
        if not url:
            raise ValueError("--clone needs a repository: --clone URL@REF")
        return url, None
    if not url:
        raise ValueError(f"--clone {value!r}: no repository before the @ (--clone URL@REF)")
    if not ref.strip():
        raise ValueError(
            f"--clone {shown(value)!r}: the ref after the last @ is empty: name a branch, "
            "tag or commit, or leave out the @ for the repository's HEAD"
        )
    return url, ref


@dataclass(frozen=True, slots=True)
class Cloned:
    """The workspace made for the attempt, and what it was made from."""

    path: Path
    commit: str
    owned: Path | None
    """The folder made for it (removed on a refusal); None: ``--workspace`` named
    an empty folder that was there already (emptied again on a refusal)."""

    def discard(self) -> None:
        """Remove what the clone made (the attempt was refused before start)."""
        if self.owned is not None:
            shutil.rmtree(self.owned, ignore_errors=True)
            return
        for child in self.path.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink()


def make(args: argparse.Namespace, problems: list[str]) -> Cloned:
    """Clone ``--clone`` into the workspace (see the file's rules), or raise
    `RefusedBeforeStart` with every problem found so far and the clone's."""
    try:
        url, ref = split(args.clone)
    except ValueError as e:
        raise RefusedBeforeStart([*problems, str(e)]) from None
    target = None if problems else _target(args.workspace, url, problems)
    if target is None:
        raise RefusedBeforeStart([*problems, f"--clone {shown(args.clone)}: nothing was cloned"])
    path, owned = target
    at = f" at {ref}" if ref else ""
    try:
        done = trio.run(clone, url, ref, path)
    except GitFailed as e:
        Cloned(path, "", owned).discard()
        words = str(e).replace(url, shown(url))
        raise RefusedBeforeStart([f"could not clone {shown(url)}{at}: {words}"]) from None
    print(
        f"governor: cloned {shown(url)}{at} (commit {done.commit[:12]}) into {path}",
        file=sys.stderr,
    )
    return Cloned(path, done.commit, owned)


def _target(
    workspace: str | None, url: str, problems: list[str]
) -> tuple[Path, Path | None] | None:
    """Where the clone goes and the folder made for it; None with the problem added."""
    if workspace is None:
        # a name of dots would be the made folder itself or its parent: `.../..` clones into attempts/
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(url.rstrip("/")).stem)[:40].strip(".") or "repo"
        try:
            folder = attempt_folder(f"clone-{name}-")
        except NoAttemptFolder as e:
            problems.append(str(e))
            return None
        return folder / name, folder
    target = Path(workspace).expanduser().absolute()
    if target.is_dir() and any(target.iterdir()):
        problems.append(
            f"--workspace {workspace} is not empty: --clone makes the workspace, so name a "
            "folder that does not exist yet (or an empty one), or leave --workspace out"
        )
    elif target.exists() and not target.is_dir():
        problems.append(f"--workspace {workspace} is a file: --clone makes the workspace there")
    elif not target.parent.is_dir():
        problems.append(f"--workspace {workspace}: its parent folder does not exist")
    else:
        return target, None if target.exists() else target
    return None
