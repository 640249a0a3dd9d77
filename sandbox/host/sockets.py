"""The host's Unix sockets, kept out of reach of a sandbox that may make its own.

Who may call ``socket(AF_UNIX)`` is `governor.sandbox.plan.profile.Profile.unix_sockets`: by
default a process with a network namespace of its own (`governor.confine.sandboxes` says
which processes share the host's). Its abstract sockets are then its own (they
belong to a network namespace), but every socket *file* it can see and write
is reachable: a read-only mount does not stop ``connect()``, which checks write
permission on the socket's inode and never the mount's flags. The survey asks
this module what to hide so that the host's daemons stay out of reach:

* ``/run`` (and ``/var/run`` where it is a directory of its own), where daemons
  keep their sockets (PostgreSQL, MySQL, journald, D-Bus, docker, nscd,
  systemd's userdb, the user's ``/run/user/UID``, ...), becomes an empty
  tmpfs. A tmpfs rather than a mask per socket: a socket made after the
  survey, by a daemon started or restarted later, is hidden too (a restart
  would even drop a mask: the kernel detaches a mount whose path is unlinked
  in another namespace). What must stay comes back (`run_view`): the links at
  the top of ``/run`` as links (NixOS's ``current-system``, on its PATH; a link
  grants nothing its target's own path does not), the directories named by
  `governor.sandbox.plan.protected.RUN_KEPT`, and the file ``/etc/resolv.conf`` leads to.
* Everywhere else outside the system directories (``/var``, ``/srv``,
  ``/opt``, ``/mnt``, other users' homes, ...), a bounded breadth-first scan
  (`host_sockets`: about 8 ms for 1,260 directories here, once per sandbox,
  and reused by the next sandbox while no directory it listed has changed,
  1.6 ms to check) finds socket files, and the profile covers each with
  ``/dev/null``: MySQL's
  ``/var/lib/mysql/mysql.sock``, postfix's, SSSD's, LXD's, the Nix daemon's,
  WSLg's under ``/mnt/wslg``, one made at ``/srv/x.sock``. A socket removed
  between the scan and bwrap's mount leaves no mount point for its cover on
  the read-only ``/``: the launch is then made again from a fresh scan
  (`governor.sandbox.run.launch.launched`), so no start fails on it and nothing there
  at the start goes uncovered.

What stays reachable (the limits of this design):

* sockets inside the roots: they are the command's own (a test server on
  ``./t.sock``), and so is one a host process made there;
* outside ``/run``: a socket at a new path made after the survey (for a
  session's sandbox, any time after it was built: the scan is made once per
  sandbox; a socket a restarted daemon made again at a covered path is covered
  again for each later command, `governor.sandbox.run.session`), one deeper than
  `governor.sandbox.plan.protected.SOCKET_SCAN_DEPTH` or beyond the scan's budget of
  directories, and one in a directory the caller can traverse but not list
  (mode 0711) whose name the process knows;
* sockets under the system directories (``/usr``, ``/etc``, ...), and in
  folders kept visible inside a hidden home or ``/tmp`` (an agent's own
  folders, toolchains: kept on purpose), none of which is scanned.
"""

from __future__ import annotations

import os
import stat
import time
from collections import deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from governor.policies.paths import is_under
from governor.sandbox.plan.protected import (
    RUN_DIRS,
    RUN_KEPT,
    RUN_LINKED_FROM,
    SCAN_SKIP_DIRS,
    SOCKET_SCAN_DEPTH,
    SOCKET_SCAN_MAX_DIRS,
    SOCKET_SCAN_SKIP,
    SYSTEM_DIRS,
)


@dataclass(frozen=True)
class RunView:
    """What a process that may make Unix sockets sees of ``/run``."""

    tmpfs: tuple[str, ...]
    """Empty tmpfs over these (``/run``; ``/var/run`` when it is not a link)."""
    kept: tuple[str, ...]
    """Directories and files bound back read-only on that tmpfs."""
    links: tuple[tuple[str, str], ...]
    """Links recreated on it, as (path, target as read)."""


def run_view() -> RunView:
    """The tmpfs over ``/run`` and what comes back on it (one listing of ``/run``)."""
    tmpfs = tuple(dict.fromkeys(os.path.realpath(d) for d in RUN_DIRS if os.path.isdir(d)))
    kept: list[str] = []
    links: list[tuple[str, str]] = []
    for top in tmpfs:
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_symlink():
                    links.append((entry.path, os.readlink(entry.path)))
                elif entry.name in RUN_KEPT and entry.is_dir(follow_symlinks=False):
                    kept.append(entry.path)
            except OSError:
                continue
    for path in RUN_LINKED_FROM:
        target = os.path.realpath(path)
        if target != path and os.path.isfile(target) and any(is_under(target, d) for d in tmpfs):
            kept.append(target)
    return RunView(tmpfs, tuple(kept), tuple(links))


@dataclass(frozen=True)
class Scan:
    """One scan for sockets: what it found, and each directory it listed with
    the ctime that directory had just before (a socket made or removed there,
    a new subdirectory, a change of mode: each changes it)."""

    found: tuple[str, ...]
    listed: tuple[tuple[str, int], ...]
    began: int
    """When the scan began (``time.time_ns``)."""

    def holds(self) -> bool:
        """Whether the same scan made now would find the same: no directory it
        listed has changed since. A directory changed less than `RACY_NS` before
        the scan is not trusted (its next change may carry the same coarse
        timestamp), so the answer is then no (git's index does the same)."""
        for path, ctime in self.listed:
            if ctime >= self.began - RACY_NS:
                return False
            try:
                if os.stat(path, follow_symlinks=False).st_ctime_ns != ctime:
                    return False
            except OSError:
                return False
        return True


RACY_NS = 2_000_000_000


def scan(
    starts: Iterable[str],
    *,
    skip: Collection[str] = (),
    depth: int = SOCKET_SCAN_DEPTH,
    max_dirs: int = SOCKET_SCAN_MAX_DIRS,
) -> Scan:
    """Socket files under ``starts`` (absolute, resolved), breadth-first: each
    start is level 1, and directories down to level ``depth`` are listed, at most
    ``max_dirs`` of them. Symlinks are not followed; directories in ``skip``,
    and those named in `governor.sandbox.plan.protected.SCAN_SKIP_DIRS`, are not entered;
    unreadable ones are passed over."""
    began = time.time_ns()
    queue = deque((start, 1) for start in dict.fromkeys(starts))
    found: list[str] = []
    listed: dict[str, int] = {}
    while queue and len(listed) < max_dirs:
        directory, level = queue.popleft()
        if directory in listed:
            continue
        try:
            listed[directory] = os.stat(directory, follow_symlinks=False).st_ctime_ns
            entries = list(os.scandir(directory))
        except OSError:
            listed.setdefault(directory, -1)
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if (
                        level < depth
                        and entry.name not in SCAN_SKIP_DIRS
                        and entry.path not in skip
                    ):
                        queue.append((entry.path, level + 1))
                elif (
                    # the entry's type says "other": one lstat tells a socket
                    not entry.is_file(follow_symlinks=False)
                    and not entry.is_symlink()
                    and stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode)
                ):
                    found.append(entry.path)
            except OSError:
                continue
    return Scan(tuple(dict.fromkeys(found)), tuple(listed.items()), began)


def find_sockets(
    starts: Iterable[str],
    *,
    skip: Collection[str] = (),
    depth: int = SOCKET_SCAN_DEPTH,
    max_dirs: int = SOCKET_SCAN_MAX_DIRS,
) -> tuple[str, ...]:
    """The socket files `scan` finds."""
    return scan(starts, skip=skip, depth=depth, max_dirs=max_dirs).found


_scans: dict[frozenset[str], Scan] = {}
"""This process's last scans of the host, by the paths each left out (a few
workspaces at once: one per set of roots and homes)."""
KEPT_SCANS = 8


def host_sockets(*, hidden: Collection[str]) -> tuple[str, ...]:
    """The host's socket files a process that may make Unix sockets would see:
    under every directory at the top of ``/`` that is not a system directory,
    leaving out ``hidden`` (the roots, which are the process's own, and the
    homes and private directories it gets an empty tmpfs over).

    The last scan for the same ``hidden`` is reused while it `Scan.holds`
    (checking costs one ``stat`` per directory it listed, about a fifth of a
    scan): sandboxes built one after another (a bwrap per command) do not scan
    again for nothing. A path of ``hidden`` below another one is left out of
    the key: the scan never enters the outer one, so it is the same scan (the
    preflight's scratch workspace and the agent's, both under a hidden
    ``/tmp`` or home, share one)."""
    key = frozenset(h for h in hidden if not any(is_under(h, o, strictly=True) for o in hidden))
    last = _scans.pop(key, None)
    if last is None or not last.holds():
        skip = {*hidden, *SYSTEM_DIRS, *SOCKET_SCAN_SKIP}
        # from "/" itself: a socket or a new directory right there is seen too
        last = scan(["/"], skip=skip, depth=SOCKET_SCAN_DEPTH + 1)
    _scans[key] = last  # the newest last
    while len(_scans) > KEPT_SCANS:
        del _scans[next(iter(_scans))]
    return last.found


def forget() -> None:
    """Drop this process's remembered scans: the next `host_sockets` scans anew
    (a retry after bwrap failed on a socket that vanished, `governor.sandbox.run.launch.launched`)."""
    _scans.clear()
