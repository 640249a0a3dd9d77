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
  writable, npm's cache, or a temporary folder anyone may write.

The caller's environment is otherwise kept: it is the operator's (their
registry, proxy and credentials for a fetch), never the agent's to shape.

`docs/security.md` lists every process the governor starts on the host; a test
records the spawns of a whole run and holds that list.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from governor.policies.paths import is_under

SYSTEM_PATH: Final = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
"""The folders every host process may find programs in (those that exist)."""

SCRIPT_SHELL: Final = "/bin/sh"
"""The shell npm would run a script with: absolute, never looked up on a ``PATH``."""

EMPTY_FOLDER_NAME: Final = "empty"


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
        ):
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


def find_program(name: str, *, near: str | None = None) -> str | None:
    """``name`` as an absolute path: itself when absolute, else found in the
    system folders, then in ``near`` (a toolchain folder, e.g. npx's for npm)."""
    if os.path.isabs(name):
        return name
    for folder in (*SYSTEM_PATH, *([near] if near else [])):
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
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
    "run",
    "run_async",
]
