"""The sandbox around the agent process itself.

Current agents run most commands and edits with their own built-in tools and
never call the client's ``fs/*`` or ``terminal/*``; only a sandbox around the
whole agent confines that. The agent's profile comes from
`Profile.for_agent`; this module finds what its install needs to stay visible
and starts it with its stdio pipes passed through unchanged.

An agent's install under ``/tmp`` (npx caches, CI scratch dirs) or ``$HOME``
(``~/.npm/_npx``, nvm, a venv) would vanish behind the private tmpfs mounts, so
`resolve_install` returns the executable (through its symlinks), its package
root (the directory holding the outermost ``node_modules``, or a ``pyvenv.cfg``
venv) and the interpreter its shebang names; they are bound read-only.

An unsandboxed agent (full-access) runs under a watchdog instead
(`governor.sandbox.standalone.watchdog`): no namespace, but the agent and everything it started
die with the governor, SIGKILL included, and at the end of the block.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path

import trio

from governor.policies.paths import is_under
from governor.sandbox.host.survey import caller_home, process_home
from governor.sandbox.host.toolchains import shebang_interpreter
from governor.sandbox.plan.profile import Profile, ProfileError
from governor.sandbox.run.launch import Launch, launched, memfd, open_launch, prepare
from governor.sandbox.run.preflight import preflight
from governor.sandbox.run.spawn import PIPE, Child, Std, spawn
from governor.sandbox.run.stubs import LEDGER
from governor.sandbox.standalone import watchdog

WATCHDOG_GRACE = 2 * watchdog.SWEEP_LIMIT
"""Seconds a watchdog gets, once told to kill, to sweep and exit before it is
SIGKILLed itself (it normally takes milliseconds)."""


def _package_root(path: str) -> str | None:
    """The directory holding the outermost ``node_modules`` above ``path``, or
    the venv (``pyvenv.cfg``) containing it."""
    parts = Path(path).parts
    if "node_modules" in parts:
        index = parts.index("node_modules")
        return str(Path(*parts[:index])) if index > 0 else None
    for parent in Path(path).parents:
        if (parent / "pyvenv.cfg").is_file():
            return str(parent)
    return None


def resolve_install(argv: Sequence[str], *, search_path: str | None = None) -> tuple[Path, ...]:
    """Host paths the agent started by ``argv`` needs to see (read-only).

    ``argv[0]`` is looked up on ``search_path`` (default ``$PATH``); later
    arguments that are existing absolute paths (``node /x/dist/index.js``)
    count too. Raises `ProfileError` when the program is not found.
    """
    if not argv:
        raise ProfileError("empty agent command")
    program = argv[0]
    exe = program if "/" in program else shutil.which(program, path=search_path)
    if exe is None or not os.path.exists(exe):
        raise ProfileError(f"agent program {program!r} not found")
    found: list[str] = []
    homes = {
        os.path.realpath(caller_home(os.getuid())),
        os.path.realpath(os.environ.get("HOME", "/")),
    }

    def keep(directory: str) -> None:
        # A prefix that is "/", $HOME or an ancestor of it would re-expose the
        # secrets the empty $HOME hides (``~/bin/agent`` has the prefix ``~``).
        if directory != "/" and not any(is_under(home, directory) for home in homes):
            found.append(directory)

    def add(path: str) -> None:
        real = os.path.realpath(path)
        found.append(real)
        root = _package_root(real)
        if root is not None:
            keep(root)
        # An interpreter installed under a prefix (pyenv, nvm, a venv's base
        # Python) needs its whole prefix (stdlib, node_modules), not just itself.
        bin_dir = os.path.dirname(real)
        if os.path.basename(bin_dir) == "bin":
            keep(os.path.dirname(bin_dir))

    add(exe)
    venv = os.path.dirname(os.path.dirname(os.path.abspath(exe)))
    if os.path.isfile(os.path.join(venv, "pyvenv.cfg")):
        keep(venv)  # a venv's bin/python is a symlink out of it
    interpreter = shebang_interpreter(os.path.realpath(exe), search_path)
    if interpreter is not None:
        add(interpreter)
    for arg in argv[1:]:
        if arg.startswith("/") and os.path.exists(arg):
            add(arg)
    return tuple(Path(p) for p in dict.fromkeys(found))


def resolve_links(
    argv: Sequence[str], *, search_path: str | None = None
) -> tuple[tuple[str, str], ...]:
    """The symlinks from ``argv[0]`` as found to the program itself, each as
    (path, target as read), so that the sandbox can recreate the ones it would
    hide: the program then runs by the path it was found at (a node script's
    imports, a venv's interpreter, depend on it)."""
    if not argv:
        return ()
    program = argv[0]
    found = program if "/" in program else shutil.which(program, path=search_path)
    if found is None:
        return ()
    path = os.path.abspath(found)
    out: list[tuple[str, str]] = []
    for _ in range(MAX_LINKS):
        if not os.path.islink(path):
            break
        target = os.readlink(path)
        out.append((path, target))
        path = os.path.normpath(os.path.join(os.path.dirname(path), target))
    return tuple(out)


MAX_LINKS = 40
"""As the kernel's limit on links followed in one lookup."""


def ensure_home_folders(profile: Profile) -> None:
    """Create the agent's missing writable home folders (mode 0700), so that what
    it stores there (a login, a cache) survives the sandbox.

    A folder inside them that runs code on the host later (a preset's
    ``runs_code`` entry ending with ``/``: ``~/.qwen/extensions/``) is made
    too, empty, so that the survey holds it read-only as a folder: agents make
    such folders at their start (``mkdir -p``), which a placeholder file in its
    place would fail. It is left behind, empty, as the agent itself would have
    made it; deleting it could detach a concurrent sandbox's mount of it.

    A name with an extension (``.claude.json``) is a file: it is bound when it
    exists and never created (an empty file or, worse, a directory in its place
    would break the agent on the host too); until it exists the agent writes it
    into its private home.
    """
    home = Path(process_home(profile))
    for folder in profile.home_folders:
        if not folder.writable or folder.overlay or Path(folder.name).suffix:
            continue
        place = Path(folder.source) if folder.source else home / folder.name
        if not os.path.lexists(place):
            place.mkdir(mode=0o700, parents=True, exist_ok=True)
        for rel in profile.home_runs_code:
            inside = rel.removesuffix("/")
            if rel.endswith("/") and inside.startswith(folder.name + "/"):
                path = place / inside[len(folder.name) + 1 :]
                if not os.path.lexists(path) and not path.parent.is_symlink():
                    with contextlib.suppress(OSError):  # the survey holds what is there
                        path.mkdir(mode=0o700, parents=True)


async def _watched(launch: Launch, *, stdin: Std, stdout: Std, stderr: Std) -> Child:
    """Start an unsandboxed ``launch`` under a watchdog and wait for its report:
    the agent started (its pidfd is adopted) or why not (`OSError`, as a direct
    spawn would have raised)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    env_fd = -1
    try:
        env_fd = memfd("governor-agent-env", watchdog.encode_environment(launch.env))
        child = spawn(
            watchdog.command(theirs.fileno(), env_fd, launch.argv),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            pass_fds=(theirs.fileno(), env_fd),
            env={},
            cwd=launch.cwd,
            start_new_session=True,
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
        if env_fd >= 0:
            os.close(env_fd)
    ours.setblocking(False)
    child.hold_lifeline(ours)
    try:
        while True:
            await trio.lowlevel.wait_readable(ours)
            try:
                report, fds, _, _ = socket.recv_fds(ours, watchdog.REPORT_MAX_BYTES, 1)
                break
            except BlockingIOError:
                continue
        if report == b"ok" and fds:
            child.adopt_inner_pidfd(fds[0])
            return child
        for fd in fds:
            os.close(fd)
        code = report.removeprefix(b"error ")
        if code != report and code.isdigit():
            raise OSError(int(code), os.strerror(int(code)), launch.argv[0])
        raise OSError(
            f"the agent's watchdog ({sys.executable} -I -S) ended before "
            "starting the agent; its stderr is the agent's"
        )
    except BaseException:
        with trio.CancelScope(shield=True):
            await _reap(child)
        raise


async def _reap(child: Child) -> None:
    """Kill ``child`` (a watchdog sweeps first) and reap it; close our pipes."""
    child.kill()
    with trio.move_on_after(WATCHDOG_GRACE):
        await child.wait()
    if child.returncode is None:  # a watchdog that did not finish (stopped, stuck)
        child.kill(hard=True)
        await child.wait()
    await child.aclose()


@asynccontextmanager
async def agent_process(
    profile: Profile,
    argv: Sequence[str],
    *,
    stdin: Std = PIPE,
    stdout: Std = PIPE,
    stderr: Std = PIPE,
    bwrap: str | os.PathLike[str] | None = None,
    attach: Callable[[int], Awaitable[None]] | None = None,
) -> AsyncIterator[Child]:
    """Start the agent under ``profile`` with its stdio as given (pipes by
    default, passed through unchanged): under bwrap, or, at full-access, under
    a watchdog (`governor.sandbox.standalone.watchdog`) whose pid is the `Child`'s.

    Use this instead of `trio.lowlevel.open_process` for a sandboxed agent: see
    `governor.sandbox.run.spawn` for why (bwrap's ``--die-with-parent`` would kill the agent
    ten seconds after trio's spawning worker thread retires). Leaving the block
    SIGKILLs the agent and its whole tree if it is still running and reaps it;
    a graceful shutdown (close stdin, wait, terminate) is the caller's, inside
    the block. An unsandboxed agent's exit code or signal is the `Child`'s: the
    watchdog exits as the agent did, once nothing the agent started is left.
    A profile behind the proxy (``egress``) needs ``attach``, which makes its
    listeners before the agent starts (`governor.sandbox.run.launch.open_launch`).
    """
    probed = await preflight(bwrap) if profile.sandboxed else None
    if profile.sandboxed:
        ensure_home_folders(profile)
    roots = (profile.workspace, *profile.extra_roots)

    async def begin(launch: Launch) -> Child:
        if launch.sandboxed:
            # Its own session, as an unsandboxed agent's watchdog has: a terminal's
            # Ctrl-C (SIGINT to its foreground group) would kill bwrap, and the
            # agent with it, before the governor could cancel the turn and end
            # the attempt as interrupted (the agent's stdin broken, stray warnings).
            launch.new_session = True
            return await open_launch(
                launch, stdin=stdin, stdout=stdout, stderr=stderr, attach=attach
            )
        return await _watched(launch, stdin=stdin, stdout=stdout, stderr=stderr)

    with LEDGER.hold(roots), ExitStack() as stack:
        child = await launched(stack, lambda: prepare(profile, argv, probed), begin)
        try:
            yield child
        finally:
            with trio.CancelScope(shield=True):
                await _reap(child)
