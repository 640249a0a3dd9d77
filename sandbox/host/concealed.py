"""What of the host no sandbox may see, whatever its profile asks: the host's
secret files, other people's homes and the governor's own state.

The survey hides these from every sandbox, the agent's and the commands',
root or not; nothing a root holds (a ``pyvenv.cfg``, a link, a ``.git``
file) and no policy ``keep`` brings them back:

* the host's secrets (`HOST_SECRET_FILES`, `HOST_SECRET_DIRS`): a root
  caller is uid 0 inside too, the owner of ``/etc/shadow``;
* the homes of everyone else: the directories of ``/home`` and the password
  database's homes of the other people and of root. The person's own homes are
  the survey's (`governor.sandbox.host.survey.other_homes`), where their toolchain is
  kept; nothing is kept from anyone else's. Each folder that holds them but
  ``/`` is one tmpfs inside (`governor.sandbox.host.survey.home_parents`, which says
  why), so `foreign_homes` also hands back the listing of each;
* the governor's state directory (`state_dir`, where every attempt's audit log
  is written by default): an agent that read it would see every earlier
  attempt's prompts, paths and refusals, of every project. Every attempt's
  own files on the host lie in it too (`attempts_dir`: relay sockets, batch
  job folders, tries copies, ``--clone`` workspaces), whatever ``TMPDIR`` is:
  a sandbox gets back only its own attempt's (its roots, its relay's folder),
  so one attempt never reaches another's socket, workspace or live log.
"""

from __future__ import annotations

import functools
import glob
import os
import pwd
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from governor.policies.paths import is_under
from governor.sandbox.plan.protected import (
    HOST_SECRET_DIRS,
    HOST_SECRET_FILES,
    NOBODY_UID,
    OTHER_HOMES_PARENT,
    PEOPLE_UID_MIN,
    SYSTEM_DIRS,
)

STATE_DIR_NAME = "acp-governor"


def state_dir() -> Path:
    """The governor's state directory: ``$XDG_STATE_HOME/acp-governor/``, by
    default under ``~/.local/state``."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / STATE_DIR_NAME


ATTEMPTS_DIR_NAME = "attempts"


def attempts_dir() -> Path:
    """Where each attempt's own files on the host are made, one folder each:
    ``attempts/`` in the state directory, hidden from every sandbox with it.
    Not under ``TMPDIR``: only ``/tmp`` and ``/var/tmp`` are private in a
    sandbox, and a ``TMPDIR`` elsewhere (``/srv/tmp``) showed every attempt's
    sockets and workspaces to every other attempt's agent."""
    return state_dir() / ATTEMPTS_DIR_NAME


def secret_files() -> tuple[str, ...]:
    """The host's secret files that exist (resolved, regular files)."""
    found = (os.path.realpath(p) for pattern in HOST_SECRET_FILES for p in glob.glob(pattern))
    return tuple(dict.fromkeys(p for p in found if os.path.isfile(p)))


def secret_dirs() -> tuple[str, ...]:
    """The host's secret folders that exist (resolved)."""
    found = (os.path.realpath(p) for p in HOST_SECRET_DIRS)
    return tuple(dict.fromkeys(p for p in found if os.path.isdir(p)))


@dataclass(frozen=True)
class Homes:
    """Everyone else's homes and the listing of each folder that holds them.

    ``listings`` maps each parent of a foreign home (``/home`` first) to its
    entries as one ``scandir`` saw them: (path, kind), kind ``dir``, ``link``
    or ``other``. For ``/home`` that one listing is also what made its folders
    homes, so no folder can be called a home and then bound back as a
    neighbour (`governor.sandbox.host.survey.home_parents` decides what is)."""

    foreign: tuple[str, ...]
    listings: Mapping[str, tuple[tuple[str, str], ...]]


def foreign_homes(own: tuple[str, ...]) -> Homes:
    """Every home but the ``own`` ones (resolved), each a directory that holds
    none of them and is no system directory, and the listings of their parents."""
    parent_of_homes = os.path.realpath(OTHER_HOMES_PARENT)  # /home -> /var/home (Silverblue)
    listed = _entries(parent_of_homes)
    found = [
        *_passwd_homes(_mtime("/etc/passwd")),
        *(path for path, kind in listed if kind == "dir"),
    ]
    out = []
    for home in dict.fromkeys(os.path.realpath(h) for h in found):
        if home == "/" or home in own or not os.path.isdir(home):
            continue
        if any(is_under(o, home) for o in own) or any(is_under(home, s) for s in SYSTEM_DIRS):
            continue
        out.append(home)
    listings = {parent_of_homes: listed} if listed else {}
    for home in out:
        parent = os.path.dirname(home)
        if parent != "/" and parent not in listings:
            listings[parent] = _entries(parent)
    return Homes(tuple(out), listings)


@functools.lru_cache(maxsize=4)
def _passwd_homes(mtime_ns: int) -> tuple[str, ...]:
    """The people's homes and root's in the password database at modification
    time ``mtime_ns`` (the cache key: a session surveys again per command)."""
    del mtime_ns
    return tuple(
        entry.pw_dir
        for entry in pwd.getpwall()
        if (entry.pw_uid == 0 or entry.pw_uid >= PEOPLE_UID_MIN)
        and entry.pw_uid != NOBODY_UID
        and os.path.isabs(entry.pw_dir)
    )


def _entries(parent: str) -> tuple[tuple[str, str], ...]:
    """(path, kind) of each entry of ``parent``, by one listing; empty when it
    cannot be listed."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return ()
    out = []
    for entry in entries:
        try:
            kind = (
                "link"
                if entry.is_symlink()
                else "dir"
                if entry.is_dir(follow_symlinks=False)
                else "other"
            )
        except OSError:
            continue
        out.append((entry.path, kind))
    return tuple(out)


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0
