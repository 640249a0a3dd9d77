"""The survey: read the host filesystem to produce the `HostFacts` a profile needs.

This is the only place that inspects paths for the profile; `render` stays pure.
It resolves roots, finds which protected paths exist (and where a missing one
must be stubbed), follows a ``.git`` file to its ``gitdir``/``commondir``, scans
a bounded depth for nested repositories and ``.env`` files, and lists the host
sockets to cover (where the process may make Unix sockets, `sandbox.sockets`
decides how ``/run`` looks and finds the rest).

A protected path that is a symlink is refused (`ProfileError`) rather than
pinned: mounting follows the link, so the link itself would stay replaceable
inside the writable root, and the next host tool would follow the replacement.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import pwd
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.profile import (
    HomeMount,
    HostFacts,
    Profile,
    ProfileError,
    ancestors_between,
    is_within,
)
from sandbox.protected import (
    HIDDEN_PATTERNS,
    HOST_DAEMON_SOCKETS,
    NESTED_GIT_NAME,
    PROTECTED_NAMES,
    SCAN_MAX_DEPTH,
    SCAN_SKIP_DIRS,
)
from sandbox.sockets import host_sockets, run_view

PRIVATE_DIRS = ("/tmp", "/var/tmp")
GITFILE_MAX_BYTES = 4096
_HIDDEN_NAME = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in HIDDEN_PATTERNS))
"""`sandbox.protected.is_hidden_name` as one compiled pattern (the same
``fnmatchcase`` translation): the scan asks it for every entry it sees."""


def caller_home(uid: int) -> str:
    """The password-database home of ``uid``: where its secrets really live,
    whatever ``$HOME`` says."""
    try:
        return pwd.getpwuid(uid).pw_dir
    except KeyError:
        return os.environ.get("HOME", "/")


def process_home(profile: Profile, uid: int | None = None) -> str:
    """The ``$HOME`` the sandboxed process is given, where its kept folders are:
    the profile's home, else the ``HOME`` it declares (an agent's, as the person
    set it), else the password database's."""
    if profile.home is not None:
        return str(profile.home)
    declared = profile.env.get("HOME", "")
    if os.path.isabs(declared):
        return declared
    return caller_home(os.getuid() if uid is None else uid)


def other_homes(home: str | None, uid: int, roots: tuple[str, ...]) -> tuple[str, ...]:
    """Every other home that holds the person's secrets, hidden too: the password
    database's and the governor's own ``$HOME`` when they are not `home` (a CI
    container sets ``HOME=/github/home``; ``sudo -E`` keeps the caller's). A home
    inside a root is left: the root's rules hold there. A root inside one (the
    workspace at ``~/src/project`` while ``$HOME`` is elsewhere) is bound back
    on top of the home's tmpfs, as in `home`."""
    found = []
    for candidate in (caller_home(uid), os.environ.get("HOME", "")):
        if not os.path.isabs(candidate):
            continue
        real = os.path.realpath(candidate)
        if real == "/" or real == home or not os.path.isdir(real):
            continue
        if any(is_within(real, r) for r in roots):
            continue
        found.append(real)
    return _dedupe(found)


def _overlaps(path: str, roots: tuple[str, ...]) -> bool:
    return any(is_within(path, r) or is_within(r, path) for r in roots)


def survey(
    profile: Profile, *, uid: int | None = None, sockets: tuple[str, ...] | None = None
) -> HostFacts:
    """Inspect the host for ``profile``; raises `ProfileError` naming a bad path.

    ``sockets`` are host sockets an earlier survey found (a session's, for
    each of its commands): the scan for them is made once per sandbox."""
    uid = os.getuid() if uid is None else uid
    roots = tuple(_resolve_root(path) for path in profile.roots)
    home_env = process_home(profile, uid)
    if profile.home is None and _overlaps(os.path.realpath(home_env), roots):
        home_env = caller_home(uid)  # a declared $HOME in (or around) a root: the root's rules
    home_real = os.path.realpath(home_env)
    home: str | None = home_real if home_real != "/" and os.path.isdir(home_real) else None

    cwd = os.path.realpath(profile.cwd if profile.cwd is not None else profile.workspace)
    if not os.path.isdir(cwd):
        raise ProfileError(f"working directory {cwd} does not exist or is not a directory")

    private_dirs = _dedupe(os.path.realpath(d) for d in PRIVATE_DIRS if os.path.isdir(d))
    run = run_view() if profile.unix_sockets else None
    if run is not None:
        private_dirs = _dedupe((*private_dirs, *run.tmpfs))
    others = tuple(
        h
        for h in other_homes(home, uid, roots)
        if not any(is_within(h, d) for d in private_dirs)  # a private /tmp hides it already
    )
    hidden_roots = (*private_dirs, *others, *([home] if home else []))

    home_mounts: list[HomeMount] = []
    if home is not None:
        for folder in profile.home_folders:
            source = os.path.join(home, folder.name)
            if os.path.exists(source):
                home_mounts.append(HomeMount(os.path.realpath(source), source, folder.writable))

    run_user = f"/run/user/{uid}"
    run_user_dir = run_user if os.path.isdir(run_user) and run is None else None
    if run is None:
        sockets = _dedupe(
            os.path.realpath(s)
            for s in HOST_DAEMON_SOCKETS
            if os.path.exists(s)
            and not any(is_within(os.path.realpath(s), d) for d in (*hidden_roots, run_user))
        )
    elif sockets is None:
        sockets = host_sockets(hidden=(*roots, *hidden_roots))

    visible = [*(run.kept if run is not None else ())]
    for path in profile.visible:
        if not os.path.exists(path):
            raise ProfileError(f"path to keep visible {path} does not exist")
        visible.append(os.path.realpath(path))

    kept = (*visible, *(m.dest for m in home_mounts))
    links = tuple(
        (path, target)
        for path, target in profile.links
        if any(is_within(path, h) for h in hidden_roots)
        and not any(is_within(path, k) for k in kept)
    ) + (run.links if run is not None else ())

    plan = _Plan(writable_roots=roots if profile.writable else ())
    hidden: list[str] = []
    for root in roots:
        found = _scan(root)
        if profile.writable:
            for rel in (*PROTECTED_NAMES, *profile.protected):
                plan.pin(root, rel, found.top)
            for rel in found.nested_git:
                plan.pin(root, rel)
        for rel in found.git_files:
            plan.follow_gitfile(os.path.join(root, rel))
        for rel in (*found.hidden, *profile.hidden):
            target = os.path.realpath(os.path.join(root, rel))
            if os.path.isfile(target) and _visible_inside(target, roots, hidden_roots):
                hidden.append(target)

    pins = plan.kept_pins()
    pinned = set(pins)
    return HostFacts(
        home=home,
        home_env=home_env,
        uid=uid,
        roots=roots,
        cwd=cwd,
        private_dirs=private_dirs,
        other_homes=others,
        home_mounts=tuple(home_mounts),
        run_user_dir=run_user_dir,
        sockets=sockets,
        visible=_dedupe(visible),
        links=links,
        git_dirs=_dedupe(plan.git_dirs),
        ancestors=plan.ancestors_for(pins),
        pins=pins,
        stubs=tuple(s for s in _dedupe(plan.stubs) if s in pinned),
        hidden=_dedupe(hidden),
    )


def _visible_inside(path: str, roots: tuple[str, ...], tmpfs_dirs: tuple[str, ...]) -> bool:
    """Whether ``path`` can be seen in the sandbox: inside a root (bound back on
    top of any tmpfs) or not under a tmpfs at all. Only visible files need a mask."""
    return any(is_within(path, r) for r in roots) or not any(is_within(path, d) for d in tmpfs_dirs)


def _resolve_root(path: Path) -> str:
    real = os.path.realpath(path)
    if not os.path.isdir(real):
        raise ProfileError(f"root {path} does not exist or is not a directory")
    return real


def _dedupe(items: Iterator[str] | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


@dataclass
class _Found:
    nested_git: list[str] = field(default_factory=list)
    git_files: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    top: dict[str, int] | None = None
    """The root's own entries: name -> file type bits (``stat.S_IFMT``); None
    when the root could not be listed."""


def _scan(root: str) -> _Found:
    """Walk ``root`` to `SCAN_MAX_DEPTH` without following symlinks, collecting
    nested ``.git`` entries, ``.git`` files (worktrees, submodules) and hidden files."""
    found = _Found()
    stack: list[tuple[str, int]] = [("", 1)]
    while stack:
        rel_dir, depth = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, rel_dir)))
        except OSError:
            continue
        if depth == 1:
            found.top = {}
        for entry in entries:
            rel = os.path.join(rel_dir, entry.name) if rel_dir else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = entry.is_file(follow_symlinks=False)
                if found.top is not None and depth == 1:
                    found.top[entry.name] = (
                        stat.S_IFDIR
                        if is_dir
                        else stat.S_IFREG
                        if is_file
                        else stat.S_IFLNK
                        if entry.is_symlink()
                        else stat.S_IFMT(entry.stat(follow_symlinks=False).st_mode)
                    )
            except OSError:
                continue
            if entry.name == NESTED_GIT_NAME:
                if rel_dir:
                    found.nested_git.append(rel)
                if is_file:
                    found.git_files.append(rel)
                continue
            if not is_dir and _HIDDEN_NAME.match(entry.name):
                found.hidden.append(rel)
            if is_dir and depth < SCAN_MAX_DEPTH and entry.name not in SCAN_SKIP_DIRS:
                stack.append((rel, depth + 1))
    return found


@dataclass
class _Plan:
    """Pins, stubs and visible git dirs accumulated over the roots."""

    writable_roots: tuple[str, ...]
    pins_with_root: dict[str, str] = field(default_factory=dict)
    stubs: list[str] = field(default_factory=list)
    git_dirs: list[str] = field(default_factory=list)

    def pin(self, root: str, rel: str, top: dict[str, int] | None = None) -> None:
        """Pin ``rel`` under ``root``, or the stub for its first missing component.
        ``top`` is the root's listing from the scan: the first component needs no
        ``lstat`` of its own (most protected names are missing, one level deep)."""
        current = root
        parts = rel.split("/")
        for index, part in enumerate(parts):
            current = os.path.join(current, part)
            if index == 0 and top is not None:
                mode = top.get(part)
            else:
                try:
                    mode = stat.S_IFMT(os.lstat(current).st_mode)
                except FileNotFoundError:
                    mode = None
            if mode is None:
                self.stubs.append(current)
                break
            if stat.S_ISLNK(mode):
                raise ProfileError(
                    f"protected path {current} is a symlink; a link cannot be pinned "
                    "read-only inside a writable root (replace it with the real file, "
                    "or run read-only)"
                )
            if not stat.S_ISDIR(mode) and index < len(parts) - 1:
                break
        self.pins_with_root.setdefault(current, root)

    def follow_gitfile(self, gitfile: str) -> None:
        """Keep a worktree's or submodule's real git dir (and its commondir)
        visible, and pinned when it lies inside a writable root."""
        gitdir = _read_pointer(gitfile, "gitdir:")
        if gitdir is None:
            return
        gitdir = os.path.realpath(os.path.join(os.path.dirname(gitfile), gitdir))
        targets = [gitdir]
        common = _read_pointer(os.path.join(gitdir, "commondir"), "")
        if common is not None:
            targets.append(os.path.realpath(os.path.join(gitdir, common)))
        for target in targets:
            root = next(
                (r for r in self.writable_roots if is_within(target, r) and target != r), None
            )
            if root is not None:
                self.pin(root, os.path.relpath(target, root))
            elif os.path.isdir(target):
                self.git_dirs.append(target)

    def kept_pins(self) -> tuple[str, ...]:
        """Pins, minus those already inside another pin (mounted read-only anyway)."""
        return _kept_pins(tuple(self.pins_with_root))

    def ancestors_for(self, pins: tuple[str, ...]) -> tuple[str, ...]:
        return _ancestors_for(pins, tuple(self.pins_with_root[pin] for pin in pins))


@functools.lru_cache(maxsize=64)
def _kept_pins(pins: tuple[str, ...]) -> tuple[str, ...]:
    """`_Plan.kept_pins`, pure and cached: a session asks the same again and again.

    A pin lies inside another one exactly when one of its parent directories
    is a pin, so each pin looks up its own parents in a set (linear in the
    pins, not quadratic).
    """
    ordered = sorted(pins, key=lambda p: (p.count("/"), p))
    kept: set[str] = set()
    out: list[str] = []
    for pin in ordered:
        if not _within_any(pin, kept):
            kept.add(pin)
            out.append(pin)
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _ancestors_for(pins: tuple[str, ...], roots: tuple[str, ...]) -> tuple[str, ...]:
    """Directories between each pin and its root (same index in ``roots``) that
    are not inside a pin themselves; pure and cached like `_kept_pins`."""
    pinned = set(pins)
    out: set[str] = set()
    for pin, root in zip(pins, roots, strict=True):
        if os.path.dirname(pin) == root:
            continue  # the common case: a pin right at the top of its root
        for ancestor in ancestors_between(root, pin):
            if not _within_any(ancestor, pinned):
                out.add(ancestor)
    return tuple(sorted(out, key=lambda p: (p.count("/"), p)))


def _within_any(path: str, paths: set[str]) -> bool:
    """Whether ``path`` equals or lies below one of ``paths`` (`is_within` against
    each, but by looking up ``path``'s own parents: linear, not quadratic)."""
    if path in paths or "/" in paths:
        return True
    end = path.rfind("/")
    while end > 0:
        if path[:end] in paths:
            return True
        end = path.rfind("/", 0, end)
    return False


def _read_pointer(path: str, prefix: str) -> str | None:
    """The path in a one-line pointer file (``gitdir: ../x`` or a bare ``commondir``)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.read(fd, GITFILE_MAX_BYTES).decode("utf-8", "replace").strip()
    finally:
        os.close(fd)
    if not text.startswith(prefix):
        return None
    lines = text[len(prefix) :].strip().splitlines()
    return lines[0].strip() or None if lines else None
