"""The one door for every process the governor starts on the host, outside any sandbox.

npm, npx, git, bwrap's probes: each runs as the operator, with the operator's
files and secrets, and each resolves things through where it stands. A
program found on a ``PATH`` entry, a ``node_modules/.bin`` npm puts first on
the ``PATH`` of the scripts it runs, the ``./node_modules`` of the cwd, a
``sh`` the script shell is looked up as: every one of them is a place an agent
could have written (the workspace, a home folder its sandbox keeps writable,
npm's cache), and then its file runs on the host at the governor's next start.
So a host process gets here, and only here:

- **an empty governor-owned cwd** (`empty_folder`), never the process's own
  cwd (a person starts the governor from their project) nor a workspace;
- **an explicit ``PATH``**: the system folders, then the folder of the program
  itself (``node`` beside ``npm``, wherever nvm put them), nothing of the
  caller's ``PATH``;
- **an absolute program**, found on that ``PATH`` when given by name;
- for npm, **no lifecycle scripts and a fixed script shell** (`npm_flags`),
  whatever the operator's or a project's ``.npmrc`` says;
- and it **refuses** (`HostProcessRefused`, naming the path and why) when the
  cwd, the program or a ``PATH`` entry lies in a place an agent may write
  (`Places`): a root of the attempt, a home folder an agent's sandbox keeps
  writable, npm's cache, or a temporary folder anyone may write; and, for a
  program, a folder an *earlier* attempt was given writable (`remember_written`
  keeps every such folder in the state folder, which no sandbox sees, by its
  path and by its identity: a folder the person renamed since is still known),
  or one not owned by root or the operator, or that others may write.

A program is found by the door's own lookup (`find_program`), never by
``shutil.which`` on the caller's ``PATH``: the system folders first, then a
toolchain folder the caller names (npx's, for npm), then the operator's
``PATH`` entries the door trusts. An entry is passed over when a program there
could not run on the host by the rules above, or when it looks like a
project's own (a ``node_modules`` folder, a folder inside a git work tree
other than a home folder kept in git): a person's activated ``.venv/bin`` or direnv's
``node_modules/.bin`` is where an attempt leaves files, and the person who
runs ``governor agents install`` from that project next would run them.

The caller's environment is otherwise kept: it is the operator's (their
registry, proxy and credentials for a fetch), never the agent's to shape.

`docs/security.md` lists every process the governor starts on the host; a test
records the spawns of a whole run and holds that list.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import struct
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from governor.policies.paths import is_under
from governor.sandbox.host.concealed import attempts_dir, state_dir

SYSTEM_PATH: Final = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
"""The folders every host process may find programs in (those that exist)."""

SCRIPT_SHELL: Final = "/bin/sh"
"""The shell npm would run a script with: absolute, never looked up on a ``PATH``."""

EMPTY_FOLDER_NAME: Final = "empty"

WRITTEN_NAME: Final = "written-folders"
"""The file in the state folder that names every folder an attempt's sandbox
was given writable (`remember_written`), one JSON value a line: its path (a
string), and its identity (``[path, st_dev, st_ino, generation]``) while it
exists."""

Identity = tuple[int, int, int | None]
"""A folder as the file system knows it, whatever its name: ``st_dev``,
``st_ino`` and the inode's generation (``FS_IOC_GETVERSION``: ext4, XFS and
btrfs give a new one when an inode number is used again, so a folder made
where a deleted one was is not taken for it; None where the file system
gives none, as tmpfs, whose inode numbers are not reused)."""

_FS_IOC_GETVERSION: Final = (2 << 30) | (struct.calcsize("l") << 16) | (ord("v") << 8) | 1
"""``_IOR('v', 1, long)``: the inode's generation, written as an int."""


class HostProcessRefused(Exception):
    """A host process would start from, or find its program in, a place an agent
    may write; the message names the path and the place."""


@dataclass(frozen=True)
class Places:
    """Where an agent may have written: nothing found there runs on the host.

    ``roots``: the attempt's roots (and a batch job's workspace); ``homes``:
    the home folders an agent's sandbox keeps writable (absolute); the npm
    cache and the temporary folders are added by `Places.of`."""

    roots: tuple[str, ...] = ()
    homes: tuple[str, ...] = ()
    caches: tuple[str, ...] = ()
    temporary: tuple[str, ...] = ()
    earlier: tuple[str, ...] = ()
    """Folders earlier attempts were given writable (`written_folders`), and
    the state folder, where every attempt's own files lie: no program there
    runs on the host."""
    earlier_identities: frozenset[Identity] = frozenset()
    """The same folders by identity (`written_identities`): one the person
    renamed or moved on its file system since is still one of them."""

    @classmethod
    def of(
        cls,
        *,
        roots: Sequence[str | Path] = (),
        homes: Sequence[str | Path] = (),
        environ: Mapping[str, str] | None = None,
    ) -> Places:
        """The places for an attempt with ``roots`` and writable ``homes``, with
        npm's cache and the temporary folders of ``environ`` (default: ours)."""
        env = os.environ if environ is None else environ
        record = _read_record()
        return cls(
            roots=_real(roots),
            homes=_real(homes),
            caches=_real(npm_caches(env)),
            temporary=_real(
                d for d in ("/tmp", "/var/tmp", "/dev/shm", env.get("TMPDIR", "")) if d
            ),
            earlier=_real([str(state_dir()), *record]),
            earlier_identities=_identities(record),
        )

    def culprit(self, path: str, *, programs: bool) -> str | None:
        """Why ``path`` may not be used (None: it may). ``programs``: it is where a
        program is found (a ``PATH`` entry, the program itself), which a
        temporary folder may not be either."""
        real = os.path.realpath(path)
        for what, places in (
            ("a root of the attempt", self.roots),
            ("a home folder an agent may write", self.homes),
            ("npm's cache", self.caches),
            *((("a temporary folder anyone may write", self.temporary),) if programs else ()),
            *(
                (("a folder an earlier attempt could write (the governor's state folder "
                  f"keeps them: {written_record()})", self.earlier),)
                if programs else ()
            ),
        ):  # fmt: skip
            for place in places:
                if is_under(real, place) or is_under(path, place):
                    return f"{what} ({place})"
        renamed = (
            next(iter(_known_by_identity((path, real), self.earlier_identities)), None)
            if programs else None
        )  # fmt: skip
        if renamed is not None:
            return (
                "a folder an earlier attempt could write, under another name now (the "
                f"governor's state folder keeps it by identity: {written_record()}) ({renamed})"
            )
        return None


def npm_caches(environ: Mapping[str, str]) -> tuple[str, ...]:
    """npm's cache folders for ``environ``: ``$npm_config_cache`` (either case)
    and ``~/.npm``, where npx keeps what it runs (``_npx/<hash>/node_modules/.bin``)."""
    found = [v for k, v in environ.items() if k.lower() == "npm_config_cache" and os.path.isabs(v)]
    home = environ.get("HOME", "")
    if os.path.isabs(home):
        found.append(os.path.join(home, ".npm"))
    return tuple(dict.fromkeys(found))


def _real(paths: Iterable[str | Path]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(os.path.realpath(p) for p in paths if str(p)))


def written_record() -> Path:
    """`WRITTEN_NAME` in the governor's state folder (hidden from every sandbox,
    so no agent can take a folder off it)."""
    return state_dir() / WRITTEN_NAME


def written_folders() -> tuple[str, ...]:
    """Every folder `remember_written` has kept, by the path it was given (none
    when the record is missing)."""
    return tuple(_read_record())


def written_identities() -> frozenset[Identity]:
    """Every identity `remember_written` has kept: the folders an attempt was
    given writable, wherever they are now on their file system."""
    return _identities(_read_record())


Record = dict[str, tuple[Identity, ...]]
"""The record read back: each folder's path, in the order first kept, with
the identities it was kept with (none: it did not exist then, or an older
governor kept it)."""


def _read_record() -> Record:
    try:
        fd = os.open(written_record(), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    with os.fdopen(fd, "rb") as f:
        fcntl.flock(fd, fcntl.LOCK_SH)  # never half a rewrite (`remember_written`)
        return _parse_written(f.read())


def _parse_written(data: bytes) -> Record:
    """The record's lines: a JSON string (a path), or ``[path, st_dev, st_ino,
    generation]`` (the generation null where none is known); any other line
    is skipped (an older governor's reader skips the lists, and still reads
    every path)."""
    found: dict[str, dict[Identity, None]] = {}
    for line in data.splitlines():
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, str) and os.path.isabs(value):
                found.setdefault(value, {})
            elif (
                isinstance(value, list)
                and len(value) == 4
                and isinstance(value[0], str)
                and os.path.isabs(value[0])
                and all(type(n) is int and n >= 0 for n in value[1:3])
                and (value[3] is None or (type(value[3]) is int and value[3] >= 0))
            ):
                found.setdefault(value[0], {})[(value[1], value[2], value[3])] = None
    return {path: tuple(ids) for path, ids in found.items()}


def _identities(record: Record) -> frozenset[Identity]:
    return frozenset(i for ids in record.values() for i in ids)


def _identity(path: str) -> Identity | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(found.st_mode):
        return None
    return (found.st_dev, found.st_ino, _generation(path))


def _generation(folder: str) -> int | None:
    """The inode's generation of ``folder``, or None when its file system gives
    none (or the folder cannot be opened: then its inode alone identifies it)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        got = fcntl.ioctl(fd, _FS_IOC_GETVERSION, bytes(struct.calcsize("l")))
    except OSError:
        return None
    finally:
        os.close(fd)
    generation: int = struct.unpack_from("I", got)[0]
    return generation


def _ancestors(path: str) -> Iterable[str]:
    current = os.path.abspath(path)
    while True:
        yield current
        parent = os.path.dirname(current)
        if parent == current:
            return
        current = parent


def _known_by_identity(paths: Iterable[str], identities: frozenset[Identity]) -> Iterable[str]:
    """Each folder holding one of ``paths`` (itself, or a folder above it, as
    written and as resolved) whose identity is one of ``identities``: a folder
    an attempt was given, by whatever name it has now. A generation unknown on
    either side matches (the inode alone: refused rather than trusted)."""
    if not identities:
        return
    generations: dict[tuple[int, int], set[int | None]] = {}
    for dev, ino, generation in identities:
        generations.setdefault((dev, ino), set()).add(generation)
    seen: set[str] = set()
    for path in paths:
        for folder in _ancestors(path):
            if folder in seen:
                continue
            seen.add(folder)
            try:
                found = os.stat(folder)
            except OSError:
                continue
            kept = generations.get((found.st_dev, found.st_ino))
            if kept is None or not stat.S_ISDIR(found.st_mode):
                continue
            now = _generation(folder)
            if now is None or None in kept or now in kept:
                yield folder


WRITTEN_PRUNE_BYTES: Final = 256 << 10
"""Past this size, `remember_written` rewrites the record: the folders still
there stay, a folder gone from its path stays by identity (renamed, or
deleted: nobody can tell) while the newest such fill half this size, a folder
never seen to exist (no identity) goes."""


@dataclass(frozen=True)
class WrittenPlaces:
    """Every folder an attempt could write, as far as the governor knows: by
    path (`written_folders`, the attempts folder, this run's roots) and by
    identity (`written_identities`). What a file the person names may not be
    reached through a link out of (`governor.boundary.person_files`, which
    asks `holding`)."""

    paths: tuple[str, ...]
    identities: frozenset[Identity] = frozenset()

    def holding(self, path: str) -> tuple[str, ...]:
        """The folders among these that hold ``path`` (itself or above it):
        those whose path it lies under, and those whose identity a folder
        above it has (a project renamed since an attempt worked in it)."""
        by_path = [p for p in self.paths if is_under(path, p)]
        return tuple(dict.fromkeys([*by_path, *_known_by_identity((path,), self.identities)]))


def written_places(*more: str | Path) -> WrittenPlaces:
    """Every folder an attempt could write, as far as the governor knows:
    `written_folders` and `written_identities`, the state folder's attempts
    folder (batch job workspaces, ``--clone`` ones) and ``more`` (this run's
    roots)."""
    record = _read_record()
    return WrittenPlaces(_real([*record, str(attempts_dir()), *more]), _identities(record))


def _lines(path: str, ids: Iterable[Identity], *, named: bool) -> bytes:
    head = json.dumps(path).encode() + b"\n" if named else b""
    return head + b"".join(json.dumps([path, *i]).encode() + b"\n" for i in ids)


def remember_written(folders: Iterable[str | Path]) -> None:
    """Keep ``folders`` (an attempt's roots and the home folders its sandbox
    keeps writable) in `written_record`, before its agent starts: from then on
    no program in them runs on the host (`Places.of`), and no link in them is
    followed out of them for a file the person names (`written_places`),
    whatever ``PATH`` a later command is given, whichever project it is started
    from. Each is kept by its path and by its identity (``st_dev``,
    ``st_ino``): the person may rename the project, or move it on its file
    system, and it is still known. Temporary folders are kept too (a scratch
    clone under ``/tmp``); those in the state folder are not (always counted).
    A folder kept earlier by its path alone (it did not exist yet, or an older
    governor kept it) gains its identity once it exists. Past
    `WRITTEN_PRUNE_BYTES` the record is rewritten (see there). Under an
    exclusive lock, so two governors at once lose neither's folders. A record
    that cannot be written is an error the caller reports: a folder not kept
    is a folder a later install would trust."""
    state = os.path.realpath(state_dir())
    new = [f for f in _real(folders) if not is_under(f, state)]
    if not new:
        return
    record = written_record()
    record.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(record, flags, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        known = _parse_written(os.pread(fd, size, 0))
        unknown = [p for p, ids in known.items() if not ids]  # an identity to gain
        added: dict[str, list[Identity]] = {}
        for path in dict.fromkeys([*new, *unknown]):
            identity = _identity(path)
            if path in new and path not in known:
                added.setdefault(path, [])
            if identity is not None and identity not in known.get(path, ()):
                added.setdefault(path, []).append(identity)
        text = b"".join(_lines(p, ids, named=p not in known) for p, ids in added.items())
        if size + len(text) > WRITTEN_PRUNE_BYTES:
            merged = {p: (*known.get(p, ()), *added.get(p, ())) for p in [*known, *added]}
            os.ftruncate(fd, 0)
            _write_all(fd, _pruned(merged, added))
        elif text:
            _write_all(fd, text)
    finally:
        os.close(fd)  # the lock goes with it


def _pruned(record: Record, added: Mapping[str, Sequence[Identity]]) -> bytes:
    """``record`` as lines, bounded, in its order: the folders just ``added``,
    every folder still at its path with the identity it has there; of the
    identities no longer at their path (renamed, moved, or deleted: nobody can
    tell; a CI's workspace made again at one path leaves one each time), the
    newest that fit in half of `WRITTEN_PRUNE_BYTES`; a path gone that has
    none of them, never."""
    kept: dict[str, dict[Identity, None]] = {}
    gone: list[tuple[str, Identity]] = []
    for path, ids in record.items():
        if path in added or os.path.lexists(path):
            kept[path] = dict.fromkeys(added.get(path, ()))
        now = _identity(path)
        for identity in ids:
            if identity == now:
                kept.setdefault(path, {})[identity] = None
            elif identity not in kept.get(path, {}):
                gone.append((path, identity))
    room = WRITTEN_PRUNE_BYTES // 2
    for path, identity in reversed(gone):
        size = len(_lines(path, [identity], named=path not in kept))
        if size > room:
            break
        kept.setdefault(path, {})[identity] = None
        room -= size
    return b"".join(_lines(p, kept[p], named=True) for p in record if p in kept)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _unmapped_owner() -> tuple[int, ...]:
    """The owner a user namespace shows for files of a uid it does not map (the
    kernel's overflow uid, 65534): root's files, seen from inside one that maps
    only the operator (a nested sandbox, a test's namespace). Only inside such a
    namespace: on the host, a file owned by that uid is someone else's."""
    try:
        with open("/proc/self/uid_map", encoding="ascii") as f:
            mapped = f.read().split()
        with open("/proc/sys/kernel/overflowuid", encoding="ascii") as f:
            overflow = int(f.read())
    except (OSError, ValueError):
        return ()
    whole = mapped[:3] == ["0", "0", "4294967295"]  # the initial namespace maps every uid
    return () if whole else (overflow,)


def _owner_culprit(path: str) -> str | None:
    """Why ``path`` (a program or its folder) could be replaced by someone else
    than root or the operator: it, or a folder above it, is owned by another
    user, or writable by its group or others (a folder above with the sticky
    bit, as ``/tmp``, only lets each change their own). None when it cannot
    be replaced so, or does not exist (nothing runs from there)."""
    me = os.getuid()
    trusted = {0, me, *_unmapped_owner()}
    current = os.path.abspath(path)
    first = True
    while True:
        try:
            found = os.lstat(current)
        except OSError:
            found = None
        if found is not None:
            if found.st_uid not in trusted:
                return f"{current} is owned by uid {found.st_uid}, not root or the operator"
            shared = found.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            if (
                shared
                and not stat.S_ISLNK(found.st_mode)
                and (first or not found.st_mode & stat.S_ISVTX)
            ):
                return f"{current} is writable by others (mode {stat.S_IMODE(found.st_mode):o})"
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current, first = parent, False


def _project_culprit(folder: str, environ: Mapping[str, str]) -> str | None:
    """Why ``folder`` (a ``PATH`` entry of the operator's) looks like a project's
    own, where an attempt works: a ``node_modules`` folder, or a folder inside
    a git work tree that is neither the home folder nor above it (a home kept
    in git is not a project). None otherwise."""
    parts = Path(folder).parts
    if "node_modules" in parts:
        return f"{folder} is in a package's node_modules"
    home = os.path.realpath(environ.get("HOME") or str(Path.home()))
    current = os.path.realpath(folder)
    while os.path.dirname(current) != current:
        if is_under(home, current):
            return None
        if os.path.lexists(os.path.join(current, ".git")):
            return f"{folder} is inside the git work tree {current}, a project's own"
        current = os.path.dirname(current)
    return None


def program_culprit(program: str, places: Places) -> str | None:
    """Why ``program`` (absolute) may not run on the host: it, or its real file,
    lies in one of ``places`` (for a program), or could be replaced by
    someone else than root or the operator. None when it may."""
    real = os.path.realpath(program)
    for path in dict.fromkeys((program, real)):
        why = places.culprit(path, programs=True)
        if why is not None:
            return f"it lies in {why}, where an agent may have written"
    for path in dict.fromkeys((program, real)):
        why = _owner_culprit(path)
        if why is not None:
            return why
    return None


def empty_folder(environ: Mapping[str, str] | None = None) -> Path:
    """An empty folder the governor owns and nobody else writes, made if missing:
    ``$XDG_DATA_HOME/acp-governor/empty`` (``~/.local/share/...`` by default),
    mode 0555. The cwd of every host process, and of an MCP server inside its
    sandbox, where it is kept visible read-only. One that holds anything, or
    that is not ours, is refused."""
    env = os.environ if environ is None else environ
    xdg = env.get("XDG_DATA_HOME", "")
    home = env.get("HOME") or str(Path.home())
    base = Path(xdg) if os.path.isabs(xdg) else Path(home) / ".local" / "share"
    folder = base / "acp-governor" / EMPTY_FOLDER_NAME
    if not folder.is_dir():
        folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        made = Path(tempfile.mkdtemp(prefix=".empty-", dir=folder.parent))
        made.chmod(0o555)
        try:
            made.rename(folder)
        except OSError:
            made.rmdir()  # made at the same time by another governor: theirs stands
    found = os.lstat(folder)
    if folder.is_symlink() or found.st_uid != os.getuid() or found.st_mode & 0o222:
        raise HostProcessRefused(
            f"{folder} is the governor's empty folder, but it is a link, not yours or "
            "writable: remove it and the governor makes it again"
        )
    if any(folder.iterdir()):
        raise HostProcessRefused(
            f"{folder} is the governor's empty folder, but it holds files: remove it "
            "and the governor makes it again"
        )
    return folder


@dataclass(frozen=True)
class HostCommand:
    """One host process as it will start: argv (absolute program), cwd, env."""

    argv: tuple[str, ...]
    cwd: str
    env: Mapping[str, str] = field(default_factory=dict)


def host_path(program_dir: str | None = None) -> str:
    """The explicit ``PATH``: the system folders that exist, then ``program_dir``."""
    entries = [d for d in SYSTEM_PATH if os.path.isdir(d)]
    if program_dir is not None and program_dir not in entries:
        entries.append(program_dir)
    return ":".join(entries)


def find_program(
    name: str,
    *,
    near: str | None = None,
    path: str | None = None,
    places: Places | None = None,
    environ: Mapping[str, str] | None = None,
    passed: list[str] | None = None,
) -> str | None:
    """``name`` as an absolute path a host process may start (`program_culprit`),
    or None: the door's own lookup, the only one for a host program.

    An absolute ``name`` is itself, or `HostProcessRefused` naming why not.
    Else the first executable ``name`` in the system folders, then in ``near``
    (a toolchain folder the caller knows: npx's own, for npm), then in the
    entries of ``path`` (the operator's ``PATH``, where nvm's npm or pyenv's
    python lie) that are not a project's own (`_project_culprit`), each found
    file passed over when it may not run. ``places``: where the agent of the
    attempt may write (default: none but the temporary folders, npm's cache
    and the folders earlier attempts were given writable). ``passed``
    collects each file passed over with why, for the caller's error."""
    env = os.environ if environ is None else environ
    where = places if places is not None else Places.of(environ=env)
    if os.path.isabs(name):
        why = program_culprit(name, where)
        if why is not None:
            raise HostProcessRefused(f"{name} was not started on the host: {why}")
        return name
    system = [*SYSTEM_PATH, *([near] if near else [])]
    entries = [e for e in (path or "").split(os.pathsep) if os.path.isabs(e)]
    for folder in dict.fromkeys([*system, *entries]):
        candidate = os.path.join(folder, name)
        if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
            continue
        why = None if folder in system else _project_culprit(folder, env)
        why = why or program_culprit(candidate, where)
        if why is None:
            return candidate
        if passed is not None:
            passed.append(f"{candidate} ({why})")
    return None


def command(
    argv: Sequence[str],
    *,
    places: Places | None = None,
    env: Mapping[str, str] | None = None,
) -> HostCommand:
    """``argv`` made ready to start on the host (see the module's rules), or
    `HostProcessRefused` naming the culprit. ``argv[0]`` must be absolute (find
    it with `find_program`); its own folder joins the system ones on ``PATH``."""
    if not argv or not os.path.isabs(argv[0]):
        raise HostProcessRefused(
            f"a host process needs its program as an absolute path, not {argv[0] if argv else 'nothing'!r}"
        )
    where = places if places is not None else Places.of(environ=env)
    program = argv[0]
    folder = os.path.dirname(program)
    search = host_path(folder)
    # the governor's own folder, found from the governor's environment: a child's
    # (git's HOME=/nonexistent) would put it elsewhere, or fail to make it there
    cwd = str(empty_folder())
    checks = [
        (program, True, "program"),
        (os.path.realpath(program), True, "program"),
        *((entry, True, "PATH entry") for entry in search.split(":")),
        (cwd, False, "working directory"),
    ]
    replaceable = _owner_culprit(program) or _owner_culprit(os.path.realpath(program))
    if replaceable is not None:
        raise HostProcessRefused(
            f"{os.path.basename(program)} was not started on the host: {replaceable}, "
            "so another may have replaced it"
        )
    for path, programs, what in checks:
        why = where.culprit(path, programs=programs)
        if why is not None:
            raise HostProcessRefused(
                f"{os.path.basename(program)} was not started on the host: its {what} "
                f"{path} lies in {why}, where an agent may have written"
            )
    environment = dict(os.environ if env is None else env)
    environment["PATH"] = search
    return HostCommand(tuple(argv), cwd, environment)


async def run_async(host: HostCommand) -> subprocess.CompletedProcess[bytes]:
    """Run ``host`` on trio to its end (killed when cancelled), stdin empty,
    its output captured as bytes. trio is imported here: `governor presets`
    reads installs through this module and answers without it."""
    import trio

    return await trio.run_process(
        list(host.argv), cwd=host.cwd, env=dict(host.env), stdin=b"",
        capture_stdout=True, capture_stderr=True, check=False,
    )  # fmt: skip


def npm_flags() -> tuple[str, ...]:
    """What every npm the governor runs on the host is given: no lifecycle
    script (``preinstall``, ``postinstall``, ``prepare``: a package's own code)
    and, were one ever run, the shell by absolute path, not looked up."""
    return ("--ignore-scripts", f"--script-shell={SCRIPT_SHELL}")


def run(
    host: HostCommand, *, timeout: float | None = None, text: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``host`` to its end with stdin empty, its output captured."""
    return subprocess.run(
        list(host.argv),
        cwd=host.cwd,
        env=dict(host.env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=text,
        timeout=timeout,
        check=False,
    )


__all__ = [
    "SCRIPT_SHELL",
    "SYSTEM_PATH",
    "HostCommand",
    "HostProcessRefused",
    "Identity",
    "Places",
    "WrittenPlaces",
    "command",
    "empty_folder",
    "find_program",
    "host_path",
    "npm_caches",
    "npm_flags",
    "program_culprit",
    "remember_written",
    "run",
    "run_async",
    "written_folders",
    "written_identities",
    "written_places",
    "written_record",
]
