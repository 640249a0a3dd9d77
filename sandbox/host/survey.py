"""The survey: read the host filesystem to produce the `HostFacts` a profile needs.

This is the only place that inspects paths for the profile; `render` stays pure.
It resolves roots, finds which protected paths exist (and where a missing one
must be stubbed), follows a ``.git`` file to its ``gitdir``/``commondir``, scans
a bounded depth for nested repositories and ``.env`` files, and lists the host
sockets to cover (where the process may make Unix sockets, `governor.sandbox.host.sockets`
decides how ``/run`` looks and finds the rest).

Git dirs (`_Plan.protect_git`): where the profile allows commits, a git dir in
a writable root (the top ``.git``, a nested one, or one a ``.git`` file or a
``commondir`` leads to) is bound writable over itself with its
`GIT_DIR_PROTECTED` parts pinned; otherwise, and when one of those parts is a
symlink, it is pinned as a whole. A git dir outside the writable roots stays
read-only (kept visible), so a linked worktree whose repository is not a root
cannot commit. A submodule's or worktree's git dir lies in a pinned
``modules/`` or ``worktrees/``: it is opened again there only when it is a git
dir (its ``HEAD`` exists, which nothing in the sandbox could have put there)
and no other protected part lies on the way (`_opened`), so a planted ``.git``
file can never open a pinned path.

A submodule ``.gitmodules`` names that is not checked out (no ``.git`` in its
folder) is pinned as it is, an empty folder git passes over: a ``.git`` made
in it would be a repository whose ``core.fsmonitor`` the person's next ``git
status`` runs (`governor.sandbox.host.git.submodule_paths`). A placeholder ``.git``
would not do: git dies on one ("invalid gitfile format") in every ``status``.

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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from governor.policies.paths import is_under
from governor.sandbox.host import concealed, toolchains
from governor.sandbox.host.git import anchored, read_host_git, submodule_paths
from governor.sandbox.host.sockets import host_sockets, run_view
from governor.sandbox.plan.profile import (
    DEFAULT_PATH,
    EXCLUDES_PATH,
    HomeMount,
    HomesParent,
    HostFacts,
    Profile,
    ProfileError,
    ancestors_between,
)
from governor.sandbox.plan.protected import (
    GIT_DIR_CONTAINERS,
    GIT_DIR_PROTECTED,
    HIDDEN_PATTERNS,
    HOST_DAEMON_SOCKETS,
    NESTED_GIT_NAME,
    PROTECTED_NAMES,
    SCAN_MAX_DEPTH,
    SCAN_SKIP_DIRS,
)

PRIVATE_DIRS = ("/tmp", "/var/tmp")
GITFILE_MAX_BYTES = 4096
_HIDDEN_NAME = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in HIDDEN_PATTERNS))
"""`governor.sandbox.plan.protected.is_hidden_name` as one compiled pattern (the same
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
        if any(is_under(real, r) for r in roots):
            continue
        found.append(real)
    return _dedupe(found)


def home_parents(
    listings: Mapping[str, tuple[tuple[str, str], ...]],
    foreign: tuple[str, ...],
    own: tuple[str, ...],
    governed: tuple[str, ...],
) -> tuple[HomesParent, ...]:
    """The folders that hold someone else's home (``/home``, the parent of a
    password database's home), each to be one empty tmpfs inside with its
    other entries, as ``listings`` (`governor.sandbox.host.concealed.Homes`) saw them,
    put back: what is neither a foreign home nor one of the ``own`` homes
    (those get a tmpfs of their own) is bound back read-only, by a bind that
    skips a source gone since, and a link is made again.

    Why not a tmpfs over each home: bwrap makes the mount point of one that
    is gone by then and fails on the read-only ``/`` ("Can't mkdir
    /home/x: Read-only file system"), so a home removed between the survey
    and the start failed the sandbox; and one made in that time was visible.
    Under a parent's tmpfs, a home removed is simply not there and one made
    later is not seen, in a session's sandbox for its whole life.

    Left out: ``/`` (``/root``'s parent: such a home keeps its own tmpfs), a
    parent inside a foreign or own home (hidden anyway), and one inside a
    private folder or a root (its homes are no foreign ones). Outer parents
    first: one inside an entry bound back (``/home/x`` holding the person's
    ``$HOME`` and another's) comes after it."""
    homes = set(foreign)
    out = []
    for parent in sorted(listings, key=_outer_first):
        if parent == "/" or not any(os.path.dirname(h) == parent for h in foreign):
            continue
        if any(is_under(parent, d) for d in (*foreign, *own, *governed)):
            continue
        kept: list[str] = []
        links: list[tuple[str, str]] = []
        for path, kind in listings[parent]:
            if path in homes or path in own:
                continue
            if kind == "link":
                try:
                    links.append((path, os.readlink(path)))
                except OSError:
                    continue  # gone since: nothing to make again
            else:
                kept.append(path)
        out.append(HomesParent(parent, tuple(kept), tuple(links)))
    return tuple(out)


def _overlaps(path: str, roots: tuple[str, ...]) -> bool:
    return any(is_under(path, r) or is_under(r, path) for r in roots)


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
        if not any(is_under(h, d) for d in private_dirs)  # a private /tmp hides it already
    )
    search_path = profile.env.get("PATH", profile.path if profile.path is not None else DEFAULT_PATH)
    on_path = [os.path.realpath(e) for e in search_path.split(":") if os.path.isabs(e)]
    own = (*([home] if home else []), *others)
    found_homes = concealed.foreign_homes(own)
    foreign = tuple(
        h
        for h in found_homes.foreign
        if not any(is_under(h, d) for d in (*private_dirs, *roots))
        and not any(is_under(e, h) for e in on_path)  # /home/linuxbrew: the host's PATH names it
    )
    parents = home_parents(found_homes.listings, foreign, own, (*private_dirs, *roots))
    hidden_roots = (*private_dirs, *foreign, *others, *([home] if home else []))
    state = os.path.realpath(concealed.state_dir())

    home_mounts: list[HomeMount] = []
    kept_by_name: dict[str, HomeMount] = {}
    if home is not None:
        for folder in profile.home_folders:
            source = os.path.join(home, folder.name)  # where the sandbox shows it
            if os.path.exists(folder.source or source) and not folder.overlay:
                real = os.path.realpath(folder.source or source)
                runs_code = folder.writable and folder.name in {
                    r.removesuffix("/") for r in profile.home_runs_code
                }
                if runs_code and os.path.isdir(real):  # a whole folder that runs code
                    home_mounts.append(HomeMount(real, source, False))
                else:
                    home_mounts.append(HomeMount(real, source, folder.writable, runs_code))
                kept_by_name[folder.name] = home_mounts[-1]
    home_pins, home_stubs, home_opened = _home_code(profile, kept_by_name)
    overlays = tuple(
        os.path.realpath(os.path.join(home, folder.name))
        for folder in profile.home_folders
        if home is not None and folder.overlay and os.path.isdir(os.path.join(home, folder.name))
    )

    run_user = f"/run/user/{uid}"
    run_user_dir = run_user if os.path.isdir(run_user) and run is None else None
    if run is None:
        sockets = _dedupe(
            os.path.realpath(s)
            for s in HOST_DAEMON_SOCKETS
            if os.path.exists(s)
            and not any(is_under(os.path.realpath(s), d) for d in (*hidden_roots, run_user))
        )
    elif sockets is None:
        # the state folder is concealed: the scan need not enter it, and must not
        # cover the attempt's own relay sockets bound back into it (`Profile.own`)
        sockets = host_sockets(hidden=(*roots, *hidden_roots, state))

    visible = [*(run.kept if run is not None else ())]
    for path in profile.visible:
        if not os.path.exists(path):
            raise ProfileError(f"path to keep visible {path} does not exist")
        visible.append(os.path.realpath(path))

    homes = (*([home] if home else []), *others)
    mounted = (*visible, *(m.dest for m in home_mounts))
    chains = toolchains.detect(
        search_path,
        _toolchain_variables(profile.env),
        homes=homes,
        roots=roots,
        visible=mounted,
        keep=toolchains.operator_folders(profile.keep, homes, state),
        detection=profile.toolchains,
        forbidden=(state,),
    )
    kept = (*mounted, *(k.path for k in chains.kept))
    hiding = tuple(
        d
        for d in (state, *concealed.secret_dirs(), *_masked_folders(profile))
        if os.path.isdir(d)
        and not any(is_under(d, r) for r in roots)  # a root's rules hold in it
        and (any(is_under(d, k) for k in kept) or not any(is_under(d, h) for h in hidden_roots))
    )
    own = _dedupe(os.path.realpath(p) for p in profile.own if os.path.isdir(p))
    links = tuple(
        (path, target)
        for path, target in profile.links
        if any(is_under(path, h) for h in hidden_roots)
        and not any(is_under(path, k) for k in kept)
    ) + (run.links if run is not None else ())

    plan = _Plan(writable_roots=roots if profile.writable else (), commits=profile.commits)
    hidden: list[str] = []
    worktrees: list[str] = []  # where a repository's files are, for its excludes
    for root in roots:
        found = _scan(root)
        if profile.commits:
            worktrees += [os.path.dirname(os.path.join(root, rel)) for rel in found.nested_git]
            if found.top is not None and NESTED_GIT_NAME in found.top:
                worktrees.append(root)
        if profile.writable:
            names = [n for n in PROTECTED_NAMES if n not in profile.unprotected]
            for rel in (*names, *profile.protected):
                if rel == NESTED_GIT_NAME:
                    plan.protect_git(root, rel, found.top)
                else:
                    plan.pin(root, rel, found.top)
            for rel in found.nested_git:
                plan.protect_git(root, rel)
            for rel in submodule_paths(root):
                # not checked out: held as it is, so no .git can be made in it
                checkout = os.path.join(root, rel)
                if not os.path.lexists(os.path.join(checkout, NESTED_GIT_NAME)) and (
                    not os.path.islink(checkout)  # git does not follow one there
                ):
                    plan.pin(root, rel)
        for rel in found.git_files:
            plan.follow_gitfile(os.path.join(root, rel))
        for rel in (*found.hidden, *profile.hidden):
            target = os.path.realpath(os.path.join(root, rel))
            if os.path.isfile(target) and _visible_inside(target, roots, hidden_roots):
                hidden.append(target)
    hidden += chains.masked
    if profile.writable:
        for path in profile.read_only:
            _pin_read_only(plan, os.path.realpath(path), roots)

    pins = plan.kept_pins()
    pinned = set(pins)
    stubs = tuple(s for s in _dedupe(plan.stubs) if s in pinned)
    hidden_files = _dedupe(hidden)
    git_env: tuple[tuple[str, str], ...] = ()
    excludes: tuple[str, ...] | None = None
    if profile.commits:
        host = read_host_git(roots[0])
        git_env = host.identity
        if "/tmp" in private_dirs and not any(is_under(EXCLUDES_PATH, r) for r in roots):
            excludes = (*host.excludes, *anchored((*stubs, *hidden_files), worktrees))
    return HostFacts(
        home=home,
        home_env=home_env,
        uid=uid,
        roots=roots,
        cwd=cwd,
        private_dirs=private_dirs,
        other_homes=others,
        foreign_homes=foreign,
        home_parents=parents,
        concealed=hiding,
        own=own,
        host_secrets=tuple(
            dict.fromkeys(
                (
                    *(f for f in concealed.secret_files() if _visible_inside(f, roots, hidden_roots)),
                    # the profile's own, always: one under a hidden folder may show
                    # again through a folder kept visible inside it (an install, a
                    # toolchain), which `_visible_inside` does not see
                    *_masked(profile),
                )
            )
        ),
        home_mounts=tuple(home_mounts),
        home_pins=home_pins,
        home_stubs=home_stubs,
        home_opened=home_opened,
        run_user_dir=run_user_dir,
        sockets=sockets,
        visible=_dedupe(visible),
        links=links,
        git_dirs=_dedupe(plan.git_dirs),
        ancestors=plan.ancestors_for(pins),
        pins=pins,
        kept=chains.kept,
        caches=tuple(
            dict.fromkeys(
                (*overlays, *(c for c in chains.caches if not any(is_under(c, m) for m in mounted)))
            )
        ),
        path=chains.path,
        toolchain_env=chains.env,
        stubs=stubs,
        hidden=hidden_files,
        git_env=git_env,
        git_excludes=excludes,
    )


def _home_code(
    profile: Profile, mounts: Mapping[str, HomeMount]
) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The pins, stubs and opened folders that hold what runs code later read-only
    inside the writable home folders (`Profile.home_runs_code`), each as (host
    path, path inside): the host's through the folder's real path, the sandbox's
    under its ``$HOME``.

    The first missing component gets the stub (nothing can be made under a file);
    an existing file or folder on the way is where the pin stops. A link on the
    way is refused: a pin follows it, and the link itself, in a writable
    folder, could be replaced by a file the host then reads."""
    pins: list[tuple[str, str]] = []
    stubs: list[str] = []
    opened: list[tuple[str, str]] = []
    for rel in (r.removesuffix("/") for r in profile.home_runs_code):
        name = next((n for n in mounts if rel.startswith(n.rstrip("/") + "/")), None)
        mount = None if name is None else mounts[name]
        if name is None or mount is None or not mount.writable:
            continue  # a home entry itself (a copy, read-only), not kept, or not there
        host, inside = mount.source, mount.dest
        parts = rel[len(name.rstrip("/")) + 1 :].split("/")
        for i, part in enumerate(parts):
            host, inside = os.path.join(host, part), os.path.join(inside, part)
            if not os.path.lexists(host):
                stubs.append(host)
                pins.append((host, inside))
                break
            if os.path.islink(host):
                raise ProfileError(
                    f"{inside} is a symbolic link, and it runs code at the agent's next start "
                    "on the host: a link in the agent's writable home folder could be replaced, "
                    "so it cannot be held read-only; make it a regular file or folder"
                )
            if i == len(parts) - 1 or not os.path.isdir(host):
                pins.append((host, inside))
                break
            opened.append((host, inside))
    return tuple(dict.fromkeys(pins)), tuple(dict.fromkeys(stubs)), tuple(dict.fromkeys(opened))


def _toolchain_variables(env: Mapping[str, str]) -> dict[str, str]:
    """The toolchain variables as the sandboxed process has them: declared in
    its environment, else the governor's own (the person's shell set them)."""
    names = toolchains.TOOLCHAIN_VARIABLES
    return {n: env.get(n, os.environ.get(n, "")) for n in names if env.get(n, os.environ.get(n))}


def _masked(profile: Profile) -> tuple[str, ...]:
    """The profile's own masked files that exist (resolved: regular files, and
    sockets, which a ``/dev/null`` over them leaves nothing to connect to)."""
    found = (os.path.realpath(p) for p in profile.masked)
    return tuple(p for p in found if os.path.isfile(p) or _is_socket(p))


def _masked_folders(profile: Profile) -> tuple[str, ...]:
    """The profile's masked folders (resolved): each an empty tmpfs inside, as
    a concealed folder is (one inside a root is not: the root is bound back
    over it, and `survey` leaves it out)."""
    found = (os.path.realpath(p) for p in profile.masked)
    return tuple(p for p in found if os.path.isdir(p))


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def _pin_read_only(plan: _Plan, path: str, roots: tuple[str, ...]) -> None:
    """Pin ``path`` read-only in the root that holds it (none: read-only anyway);
    `ProfileError` for a path that is a root or holds one, which cannot be
    pinned without making the whole root read-only."""
    if any(is_under(r, path) for r in roots):
        raise ProfileError(
            f"read-only path {path} is a root or holds one; it cannot be kept read-only "
            "inside a writable root"
        )
    root = next((r for r in roots if is_under(path, r)), None)
    if root is not None and os.path.lexists(path):
        plan.pin(root, os.path.relpath(path, root))


def _visible_inside(path: str, roots: tuple[str, ...], tmpfs_dirs: tuple[str, ...]) -> bool:
    """Whether ``path`` can be seen in the sandbox: inside a root (bound back on
    top of any tmpfs) or not under a tmpfs at all. Only visible files need a mask."""
    return any(is_under(path, r) for r in roots) or not any(is_under(path, d) for d in tmpfs_dirs)


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
    """Pins, stubs, writable git dirs and visible git dirs accumulated over the roots."""

    writable_roots: tuple[str, ...]
    commits: bool = False
    pins_with_root: dict[str, str] = field(default_factory=dict)
    stubs: list[str] = field(default_factory=list)
    git_dirs: list[str] = field(default_factory=list)
    open_dirs: dict[str, tuple[str, bool]] = field(default_factory=dict)
    """Git dirs to bind writable over themselves -> (their root, whether ``HEAD``
    is there); `_opened` decides which of them are."""
    followed: set[str] = field(default_factory=set)

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

    def protect_git(self, root: str, rel: str, top: dict[str, int] | None = None) -> None:
        """Protect the git dir (or ``.git`` file) ``rel`` under ``root``.

        Where commits are allowed and it is a directory: bound writable over
        itself, its `GIT_DIR_PROTECTED` parts pinned (stubs for missing ones).
        Otherwise (commits off, a file, missing, or a protected part that is a
        symlink, such as a shared hooks folder, which cannot be pinned alone)
        it is pinned as a whole, as `pin` does. Its ``commondir`` is followed.
        """
        path = os.path.join(root, rel)
        if path in self.followed:
            return
        self.followed.add(path)
        mode = top.get(rel) if top is not None and "/" not in rel else _mode(path)
        listing = _modes(path) if self.commits and mode == stat.S_IFDIR else None
        if listing is None or any(
            stat.S_ISLNK(listing.get(name, 0)) for name in GIT_DIR_PROTECTED
        ):
            self.pin(root, rel, top)
        else:
            self.open_dirs.setdefault(path, (root, listing.get("HEAD") == stat.S_IFREG))
            for name in GIT_DIR_PROTECTED:
                self.pin(path, name, listing)
        if mode == stat.S_IFDIR:
            self._follow_commondir(path)

    def follow_gitfile(self, gitfile: str) -> None:
        """Follow a worktree's or submodule's ``.git`` file to its real git dir."""
        gitdir = _read_pointer(gitfile, "gitdir:")
        if gitdir is not None:
            target = os.path.realpath(os.path.join(os.path.dirname(gitfile), gitdir))
            self._git_dir(target, _names_checkout(target, os.path.realpath(gitfile)))

    def _follow_commondir(self, gitdir: str) -> None:
        common = _read_pointer(os.path.join(gitdir, "commondir"), "")
        if common is not None:  # our placeholder's "." leads back to gitdir: followed
            target = os.path.realpath(os.path.join(gitdir, common))
            self._git_dir(target, is_under(gitdir, os.path.join(target, "worktrees")))

    def _git_dir(self, target: str, leads_back: bool) -> None:
        """A git dir a pointer leads to: protected when it lies inside a writable
        root, else kept visible (read-only) only when it ``leads_back`` to the
        pointer, its own commondir followed. The pointer lies in a root, which
        the agent writes: followed blindly, a planted ``gitdir: /root/.ssh``
        would show that folder to every later sandbox. Where it leads back is
        written outside the writable roots, by the host's git."""
        root = next((r for r in self.writable_roots if is_under(target, r, strictly=True)), None)
        if root is not None:
            self.protect_git(root, os.path.relpath(target, root))
        elif target not in self.followed and leads_back:
            self.followed.add(target)
            if os.path.isdir(target):
                self.git_dirs.append(target)
                self._follow_commondir(target)

    def opened(self) -> tuple[str, ...]:
        """The git dirs bound writable over themselves (see `_opened`)."""
        dirs = tuple(self.open_dirs)
        heads = tuple(self.open_dirs[d][1] for d in dirs)
        return _opened(dirs, heads, tuple(self.pins_with_root), tuple(self.pins_with_root.values()))

    def kept_pins(self) -> tuple[str, ...]:
        """Pins, minus those already inside another pin (mounted read-only anyway)
        with no writable git dir in between."""
        return _kept_pins(tuple(self.pins_with_root), self.opened())

    def ancestors_for(self, pins: tuple[str, ...]) -> tuple[str, ...]:
        opened = self.opened()
        return _ancestors_for(
            pins,
            tuple(self.pins_with_root[pin] for pin in pins),
            opened,
            tuple(self.open_dirs[d][0] for d in opened),
        )


def _mode(path: str) -> int | None:
    try:
        return stat.S_IFMT(os.lstat(path).st_mode)
    except FileNotFoundError:
        return None


def _modes(directory: str) -> dict[str, int]:
    """Name -> file type bits of the entries of ``directory`` (one listing, for
    `_Plan.pin` to use as its ``top``); empty when it cannot be listed."""
    modes: dict[str, int] = {}
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return modes
    for entry in entries:
        try:
            modes[entry.name] = stat.S_IFMT(entry.stat(follow_symlinks=False).st_mode)
        except OSError:
            continue
    return modes


def _outer_first(path: str) -> tuple[int, str]:
    return path.count("/"), path


@functools.lru_cache(maxsize=64)
def _opened(
    dirs: tuple[str, ...],
    heads: tuple[bool, ...],
    pins: tuple[str, ...],
    pin_roots: tuple[str, ...],
) -> tuple[str, ...]:
    """Which git dirs of `_Plan.open_dirs` are bound writable; pure and cached.

    One that lies inside no pin (the top ``.git``, a nested repository's) is.
    One inside a pin is only when that pin is the ``modules/`` or
    ``worktrees/`` of a git dir opened itself, nothing between them is another
    protected part, and its ``HEAD`` exists: a submodule's or a linked
    worktree's git dir. Anything else a ``.git`` file points into (``hooks/``,
    a policy's protected folder, ``modules/`` itself) stays read-only, and
    the pins planned inside a git dir that is not opened count for nothing.
    """
    pinned = set(pins)
    inside: dict[str, list[str]] = {}
    for pin, root in zip(pins, pin_roots, strict=True):
        inside.setdefault(root, []).append(pin)
    head = dict(zip(dirs, heads, strict=True))
    opened: set[str] = set()
    closed = frozenset(GIT_DIR_PROTECTED) - GIT_DIR_CONTAINERS
    for path in sorted(dirs, key=_outer_first):  # outer first: a parent is decided before
        near = None if path in pinned else _nearest(path, pinned, opened)
        if path in pinned or (
            near is not None
            and near not in opened
            and (
                os.path.basename(near) not in GIT_DIR_CONTAINERS
                or os.path.dirname(near) not in opened
                or closed.intersection(os.path.relpath(path, near).split("/"))
                or not head[path]
            )
        ):
            pinned.difference_update(inside.get(path, ()))
            continue
        opened.add(path)
    return tuple(sorted(opened, key=_outer_first))


@functools.lru_cache(maxsize=64)
def _kept_pins(pins: tuple[str, ...], opened: tuple[str, ...]) -> tuple[str, ...]:
    """`_Plan.kept_pins`, pure and cached: a session asks the same again and again.

    A pin is left out when the nearest pin or writable git dir above it is a
    pin. Each pin looks up its own parents in sets (linear in the pins, not
    quadratic).
    """
    pinned, writable = set(pins), set(opened)
    return tuple(
        pin
        for pin in sorted(pins, key=_outer_first)
        if (near := _nearest(pin, pinned, writable)) is None or near in writable
    )


@functools.lru_cache(maxsize=64)
def _ancestors_for(
    pins: tuple[str, ...],
    roots: tuple[str, ...],
    opened: tuple[str, ...],
    opened_roots: tuple[str, ...],
) -> tuple[str, ...]:
    """The directories bound writable over themselves: the writable git dirs and
    the directories between each pin or git dir and its root (same index in
    ``roots``, ``opened_roots``) that are not pinned, nor inside a pin; pure
    and cached like `_kept_pins`."""
    pinned, writable = set(pins), set(opened)
    out: set[str] = set(opened)
    for path, root in zip((*pins, *opened), (*roots, *opened_roots), strict=True):
        if os.path.dirname(path) == root:
            continue  # the common case: right at the top of its root (or its git dir)
        for ancestor in ancestors_between(root, path):
            if ancestor in pinned or ancestor in out:
                continue
            near = _nearest(ancestor, pinned, writable)
            if near is None or near in writable:
                out.add(ancestor)
    return tuple(sorted(out, key=_outer_first))


def _nearest(path: str, pins: set[str], opened: set[str]) -> str | None:
    """The nearest directory above ``path`` that is in ``pins`` or ``opened``, if
    any; by looking up ``path``'s own parents (linear, not quadratic)."""
    end = path.rfind("/")
    while end > 0:
        parent = path[:end]
        if parent in pins or parent in opened:
            return parent
        end = path.rfind("/", 0, end)
    return None


def _names_checkout(gitdir: str, gitfile: str) -> bool:
    """Whether the git dir ``gitdir`` names the checkout whose ``.git`` file is
    ``gitfile``: a linked worktree's ``gitdir`` file names that ``.git`` file,
    a submodule's ``core.worktree`` its folder. The host's git writes both
    outside the checkout; a ``.git`` file alone proves nothing."""
    back = _read_pointer(os.path.join(gitdir, "gitdir"), "")
    if back is not None and os.path.realpath(os.path.join(gitdir, back)) == gitfile:
        return True
    worktree = _config_worktree(os.path.join(gitdir, "config"))
    checkout = os.path.dirname(gitfile)
    return worktree is not None and os.path.realpath(os.path.join(gitdir, worktree)) == checkout


def _config_worktree(path: str) -> str | None:
    """The ``worktree`` key of a git config's ``[core]`` section, if any."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(GITFILE_MAX_BYTES * 16)
    except OSError:
        return None
    section = ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]").strip().lower()
        elif section == "core":
            key, _, value = line.partition("=")
            if key.strip().lower() == "worktree" and value.strip():
                return value.strip().strip('"')
    return None


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
