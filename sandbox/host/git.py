"""What a sandboxed ``git`` takes from the person's git config on the host, and
what it must not see of the sandbox itself.

The sandbox's ``$HOME`` is an empty tmpfs, so ``~/.gitconfig`` is hidden and a
commit inside fails with "Author identity unknown". The whole file is never
exposed: it may hold ``http.extraheader`` tokens, credential helpers,
``url.*.insteadOf`` rewrites with passwords. Two things are taken instead:

* the identity, as ``GIT_AUTHOR_*``/``GIT_COMMITTER_*`` variables (a profile
  that declares one keeps its own). It is resolved the way the host's git would
  resolve it *in the workspace* (``git config`` run there: system, global,
  ``includeIf`` and the repository's own config; ``author.*``/``committer.*``
  before ``user.*``), so a work repository's identity is not replaced by the
  global one. Limit: the variables win over a *nested* repository's own
  ``user.*``.
* the excludes, so that ``git status`` and ``git add -A`` inside see what they
  see on the host: the effective ``core.excludesFile``'s patterns, plus every
  path the sandbox put there itself, anchored in its repository: the
  placeholders of missing protected names (``git add -A`` would commit them)
  and the masked secret files (``git add -A`` refuses a masked ``/dev/null``
  and adds nothing at all). They reach git as one file inside the sandbox and
  ``core.excludesFile`` naming it (``GIT_CONFIG_COUNT``, which outranks a
  repository's own ``core.excludesFile``: its patterns are in the file too).
  A session's file is the one made when its sandbox was built: a secret file
  masked for a later command only is not in it.

``git config`` runs once per workspace and home per process (`read_host_git`
is cached): the survey runs for every command of a session, and a subprocess
there would be most of a command's cost. It runs with ``stdin`` closed and a
timeout, and git's ``config`` reads files only: nothing in the workspace's
config runs (no fsmonitor, hooks or filters are involved in reading config).
"""

from __future__ import annotations

import functools
import os
import re
import stat
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from governor.policies.paths import is_under
from governor.sandbox.host import processes

CONFIG_TIMEOUT: Final = 5.0
EXCLUDES_MAX_BYTES: Final = 256 * 1024
_KEYS: Final = r"^((user|author|committer)\.(name|email)|core\.excludesfile)$"
_REPO_VARIABLES: Final = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE")
_GLOB_SPECIAL: Final = "\\*?["


@dataclass(frozen=True)
class HostGit:
    """The identity variables and the effective excludes' patterns."""

    identity: tuple[tuple[str, str], ...] = ()
    excludes: tuple[str, ...] = ()


def read_host_git(workspace: str) -> HostGit:
    """`HostGit` for ``workspace``, as the host's git resolves it there; cached
    per workspace and per the variables that choose the config files."""
    chosen = tuple(
        os.environ.get(name)
        for name in ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM")
    )
    return _read_host_git(workspace, chosen)


@functools.lru_cache(maxsize=32)
def _read_host_git(workspace: str, _chosen: tuple[str | None, ...]) -> HostGit:
    values = _config(workspace)
    identity = []
    for role, variable in (("author", "AUTHOR"), ("committer", "COMMITTER")):
        for part in ("name", "email"):
            value = values.get(f"{role}.{part}") or values.get(f"user.{part}")
            if value:
                identity.append((f"GIT_{variable}_{part.upper()}", value))
    excludes = _excludes_file(workspace, values.get("core.excludesfile"))
    return HostGit(tuple(identity), _read_patterns(excludes) if excludes else ())


def _config(workspace: str) -> dict[str, str]:
    git = processes.find_program("git")
    if git is None:
        return {}
    env = {k: v for k, v in os.environ.items() if k not in _REPO_VARIABLES}
    try:
        host = processes.command(
            [git, "-C", workspace, "config", "-z", "--includes", "--get-regexp", _KEYS],
            places=processes.Places(),  # the governor's own probe: its program is a system one
            env=env,
        )
        done = processes.run(host, timeout=CONFIG_TIMEOUT, text=False)
    except (OSError, subprocess.SubprocessError, processes.HostProcessRefused):
        return {}
    values: dict[str, str] = {}
    stdout = done.stdout if isinstance(done.stdout, bytes) else done.stdout.encode()
    for entry in stdout.decode("utf-8", "replace").split("\0"):
        key, _, value = entry.partition("\n")
        if key:
            values[key.lower()] = value  # the last one wins, as in git
    return values


def _excludes_file(workspace: str, configured: str | None) -> str | None:
    if configured:
        if configured.startswith("~/"):
            return os.path.join(os.environ.get("HOME", "/"), configured[2:])
        return os.path.join(workspace, configured)  # an absolute one stays as it is
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.environ.get("HOME", "/"), ".config")
    return os.path.join(xdg, "git", "ignore")


def _read_patterns(path: str) -> tuple[str, ...]:
    """The lines of the person's excludes file: a regular file only (never a
    FIFO that would block), at most `EXCLUDES_MAX_BYTES`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ()
        data = os.read(fd, EXCLUDES_MAX_BYTES)
    except OSError:
        return ()
    finally:
        os.close(fd)
    return tuple(data.decode("utf-8", "replace").splitlines())


def anchored(paths: Iterable[str], worktrees: Iterable[str]) -> tuple[str, ...]:
    """Exclude patterns matching exactly ``paths`` in each repository whose
    worktree (in ``worktrees``) holds them: ``/rel/path``, glob characters
    escaped. Paths inside a ``.git`` are left out (git never lists them), and
    so are names with a line break, which no pattern line can hold."""
    tops = tuple(worktrees)
    out: list[str] = []
    for path in paths:
        if "\n" in path or "\r" in path:
            continue
        for top in tops:
            if not is_under(path, top, strictly=True):
                continue
            rel = path[len(top.rstrip("/")) + 1 :]
            if ".git" in rel.split("/"):
                continue
            out.append("/" + _literal(rel))
    return tuple(dict.fromkeys(out))


def _literal(rel: str) -> str:
    escaped = "".join(f"\\{c}" if c in _GLOB_SPECIAL else c for c in rel)
    if escaped.endswith(" "):
        escaped = escaped[:-1] + "\\ "
    return escaped


GITMODULES_MAX_BYTES: Final = 64 * 1024
_PATH_KEY: Final = re.compile(r"^\s*path\s*=\s*(.*?)\s*$", re.IGNORECASE)


def submodule_paths(root: str) -> tuple[str, ...]:
    """The checkout paths ``.gitmodules`` at the top of ``root`` names (relative,
    plain: no ``..``, no absolute path, as git itself requires), read without
    following a link; empty when there is none or it cannot be read.

    Why the survey asks: a submodule that is not checked out is an empty folder
    git passes over, and a ``.git`` the agent makes in it is a repository
    whose config (``core.fsmonitor``) the person's next ``git status`` in the
    outer repository runs. ``.gitmodules`` itself is protected, so the paths
    read when the sandbox is built are the paths for its whole life."""
    try:
        fd = os.open(os.path.join(root, ".gitmodules"), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ()
        text = os.read(fd, GITMODULES_MAX_BYTES).decode("utf-8", "replace")
    finally:
        os.close(fd)
    found = []
    for line in text.splitlines():
        match = _PATH_KEY.match(line)
        if match is None:
            continue
        value = _config_value(match.group(1))
        parts = value.split("/")
        if value and not value.startswith("/") and not any(p in ("", ".", "..") for p in parts):
            found.append(value)
    return tuple(dict.fromkeys(found))


def _config_value(raw: str) -> str:
    """A git config value as git reads it: double quotes joined, ``\\"`` and
    ``\\\\`` unescaped, a ``#`` or ``;`` outside quotes ending it."""
    out: list[str] = []
    quoted = False
    chars = iter(raw)
    for char in chars:
        if char == '"':
            quoted = not quoted
        elif char == "\\":
            out.append(next(chars, ""))
        elif char in "#;" and not quoted:
            break
        else:
            out.append(char)
    return "".join(out).strip()
