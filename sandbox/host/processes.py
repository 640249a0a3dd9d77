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
  keeps every such folder in the state folder, which no sandbox sees), or one
  not owned by root or the operator, or that others may write.

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
"""The file in the state folder that names, one JSON string a line, every
folder an attempt's sandbox was given writable (`remember_written`)."""


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
        return cls(
            roots=_real(roots),
            homes=_real(homes),
            caches=_real(npm_caches(env)),
            temporary=_real(
                d for d in ("/tmp", "/var/tmp", "/dev/shm", env.get("TMPDIR", "")) if d
            ),
            earlier=_real([str(state_dir()), *written_folders()]),
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
    """Every folder `remember_written` has kept (none when the record is missing;
    a line that is not a JSON string is skipped)."""
    try:
        fd = os.open(written_record(), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ()
    with os.fdopen(fd, "rb") as f:
        fcntl.flock(fd, fcntl.LOCK_SH)  # never half a rewrite (`remember_written`)
        return _parse_written(f.read())


def _parse_written(data: bytes) -> tuple[str, ...]:
    found = []
    for line in data.splitlines():
        with contextlib.suppress(ValueError):
            name = json.loads(line)
            if isinstance(name, str) and os.path.isabs(name):
                found.append(name)
    return tuple(dict.fromkeys(found))


WRITTEN_PRUNE_BYTES: Final = 256 << 10
"""Past this size, `remember_written` rewrites the record without the folders
that no longer exist (a test suite's workspaces, removed clones)."""


def written_places(*more: str | Path) -> tuple[str, ...]:
    """The real paths of every folder an attempt could write, as far as the
    governor knows: `written_folders`, the state folder's attempts folder
    (batch job workspaces, ``--clone`` ones) and ``more`` (this run's roots).
    What a file the person names may not be reached through a link out of
    (`governor.boundary.person_files`)."""
    return _real([*written_folders(), str(attempts_dir()), *more])


def remember_written(folders: Iterable[str | Path]) -> None:
    """Keep ``folders`` (an attempt's roots and the home folders its sandbox
    keeps writable) in `written_record`, before its agent starts: from then on
    no program in them runs on the host (`Places.of`), whatever ``PATH`` a
    later command is given, whichever project it is started from. Those in the
    state folder or a temporary folder are left out (always refused for a
    program); each is kept once. Past `WRITTEN_PRUNE_BYTES` the folders gone
    since are dropped: what an attempt left there went with them. Under an
    exclusive lock, so two governors at once lose neither's folders. A record
    that cannot be written is an error the caller reports: a folder not kept
    is a folder a later install would trust."""
    state = os.path.realpath(state_dir())
    skip = _real([state, "/tmp", "/var/tmp", "/dev/shm"])
    new = [f for f in _real(folders) if not any(is_under(f, s) for s in skip)]
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
        added = [f for f in new if f not in known]
        if size + sum(len(f) for f in added) > WRITTEN_PRUNE_BYTES:
            kept = [f for f in known if os.path.lexists(f)]
            os.ftruncate(fd, 0)
            _write_all(fd, b"".join(json.dumps(f).encode() + b"\n" for f in [*kept, *added]))
        elif added:
            _write_all(fd, b"".join(json.dumps(f).encode() + b"\n" for f in added))
    finally:
        os.close(fd)  # the lock goes with it


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
    "Places",
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
    "written_places",
    "written_record",
]
