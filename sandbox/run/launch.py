"""Everything between a profile and a spawn: survey, stubs, fds, the final argv.

`prepare` is a context manager because what it creates must be undone: the
stubs for missing protected paths (see `governor.sandbox.run.stubs`) must outlive the
process, the descriptors bwrap reads are closed on our side right after the
spawn (`Launch.spawned`) and in any case when the block ends. `open_launch`
spawns a prepared launch.

Why every bwrap option goes through ``--args FD`` (a memfd): ``--setenv NAME
VALUE`` on the command line would put the declared secrets (API keys for an
agent) in ``/proc/PID/cmdline``, which every local user can read. Only the
command itself stays on the real command line (bwrap requires it there). bwrap
is started with an empty environment for the same reason: its own pid-1 reaper
inside the sandbox keeps the environment block it was started with.

The seccomp program goes through a fresh memfd per spawn, rewound to offset 0:
bwrap reads from the fd's current offset, so a reused one fails with EINVAL.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import functools
import os
import re
import resource
import select
import stat
import termios
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from typing import Final, TypeVar

import trio

from governor.sandbox.host.budget import current as attempt_budget
from governor.sandbox.host.bwrap import Bwrap, SandboxStartFailed, bwrap_line, failure_of
from governor.sandbox.host.limits import command_prefix, launcher
from governor.sandbox.host.sockets import forget
from governor.sandbox.host.survey import caller_home, survey
from governor.sandbox.plan import seccomp
from governor.sandbox.plan.bwrap_argv import environment, render
from governor.sandbox.plan.profile import (
    DEFAULT_PATH,
    HostFacts,
    Profile,
    ProfileError,
)
from governor.sandbox.run.spawn import DEVNULL, PIPE, STDOUT, Child, Std, spawn
from governor.sandbox.run.stubs import LEDGER, StubLedger

T = TypeVar("T")


@dataclass
class Launch:
    """How to start one process: argv, fds to hand over, environment, cwd, session.

    ``info_fd`` (sandboxed only) is the read end of bwrap's ``--info-fd`` pipe,
    on which bwrap reports the host pid of the sandbox's pid 1; `open_launch`
    reads it so that a kill can always reach the whole namespace.
    """

    argv: tuple[str, ...]
    pass_fds: tuple[int, ...]
    env: dict[str, str]
    cwd: str | None
    new_session: bool
    sandboxed: bool
    info_fd: int | None = None
    block_fd: int | None = None
    """(behind the proxy, or covering host sockets) the write end of bwrap's
    ``--block-fd``: the command starts once a byte is written, after its
    listeners exist (`open_launch`)."""
    proxied: bool = False
    """Behind the proxy: ``block_fd`` waits for its listeners (`open_launch`)."""
    sockets: tuple[str, ...] = ()
    """The host sockets this launch covers with ``/dev/null`` (`launched`)."""
    _open: set[int] = field(default_factory=set, repr=False)

    def spawned(self) -> None:
        """Close our copies of the descriptors only the child needs (bwrap holds
        its own now); idempotent."""
        for fd in self.pass_fds:
            if fd in self._open:
                self._open.discard(fd)
                os.close(fd)


@functools.cache
def filter_program(allow_unix_sockets: bool) -> bytes:
    """The seccomp program for sandboxed commands (built once per variant)."""
    return seccomp.build(allow_unix_sockets=allow_unix_sockets)


def memfd(name: str, data: bytes) -> int:
    """A close-on-exec memfd holding ``data``, rewound to its start."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_pin(path: str) -> int:
    """An ``O_PATH|O_NOFOLLOW`` descriptor of ``path`` (a path to pin, mask or
    self-bind), refusing a symlink."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise ProfileError(f"cannot open protected path {path}: {exc.strerror}") from None
    if stat.S_ISLNK(os.fstat(fd).st_mode):
        os.close(fd)
        raise ProfileError(f"protected path {path} turned into a symlink; refusing to run")
    return fd


THROWAWAY_MAX_BYTES: Final = 64 << 20
"""The largest home file copied for a sandbox to write and throw away
(`governor.sandbox.plan.profile.HomeMount.throwaway`); a larger one is refused."""


def _copy_of(path: str) -> int:
    """A memfd holding the content of ``path`` (a regular file, not
    followed if a link), for bwrap's ``--bind-data``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ProfileError(f"cannot read {path} to give the agent a copy: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > THROWAWAY_MAX_BYTES:
            raise ProfileError(
                f"{path} is not a regular file of at most {THROWAWAY_MAX_BYTES >> 20} MiB: "
                "the agent's sandbox cannot give it a copy to write"
            )
        data = b""
        while len(data) <= THROWAWAY_MAX_BYTES:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    return memfd("governor-home-copy", data)


@contextmanager
def prepare(
    profile: Profile,
    command: Sequence[str],
    bwrap: Bwrap | None,
    *,
    facts: HostFacts | None = None,
    ledger: StubLedger = LEDGER,
    fork_server: Sequence[int] | None = None,
) -> Iterator[Launch]:
    """Build the `Launch` for ``command`` under ``profile``; undo it on exit.

    Full-access needs no bwrap: the command runs as is, in its own session
    (so the runner can kill its process group), with the declared environment.

    ``fork_server`` makes a session's sandbox (`governor.sandbox.run.session`): the
    descriptors it lists are handed to ``command`` (the caller's; not closed
    here), and bwrap gets no filter (see `governor.sandbox.plan.bwrap_argv.render`).
    """
    if not command:
        raise ProfileError("empty command")
    if not profile.sandboxed:
        cwd = os.path.realpath(profile.cwd if profile.cwd is not None else profile.workspace)
        home = str(profile.home) if profile.home is not None else caller_home(os.getuid())
        env = environment(
            profile,
            HostFacts(
                home=None,
                home_env=home,
                uid=os.getuid(),
                roots=(),
                cwd=cwd,
                path=profile.path or DEFAULT_PATH,
            ),
        )
        yield Launch(tuple(command), (), env, cwd, True, False)
        return
    if bwrap is None:
        raise ProfileError("a sandboxed run needs a probed bwrap (see governor.sandbox.run.preflight)")
    facts = facts if facts is not None else survey(profile)
    with ExitStack() as stack:
        opened: set[int] = set()
        fds: list[int] = []

        def track(fd: int) -> int:
            opened.add(fd)
            fds.append(fd)
            return fd

        stack.callback(_close_open, opened)
        sealed: set[str] = set()
        if profile.writable:
            sealed = acquire_stubs(ledger, facts.pins, facts.stubs, stack)
        home_pins = [host for host, _ in facts.home_pins]
        if home_pins:  # the agent's home folders are writable at every capability
            sealed |= acquire_stubs(ledger, home_pins, facts.home_stubs, stack)
        pin_fds: dict[str, int] = {}
        if bwrap.features.ro_bind_fd:
            for pin in (*(facts.pins if profile.writable else ()), *home_pins):
                if pin not in sealed:
                    pin_fds[pin] = track(open_pin(pin))
        throwaway_fds = {
            m.dest: track(_copy_of(m.source)) for m in facts.home_mounts if m.throwaway
        }
        seccomp_fd: int | None = None
        if fork_server is None:
            seccomp_fd = track(
                memfd("governor-seccomp", filter_program(profile.unix_sockets))
            )
        else:
            fds.extend(fork_server)
        excludes_fd: int | None = None
        if facts.git_excludes is not None:
            lines = "".join(f"{line}\n" for line in facts.git_excludes)
            excludes_fd = track(memfd("governor-git-excludes", lines.encode()))
        info_read, info_write = os.pipe2(os.O_CLOEXEC)
        opened.add(info_read)
        track(info_write)
        # A host socket found by a survey that may be a while old (it is reused
        # while its folders hold) and gone since would fail bwrap's cover of it
        # ("Can't create file"): cover only those still there, just before.
        live = tuple(sock for sock in facts.sockets if os.path.lexists(sock))
        if live != facts.sockets:
            facts = replace(facts, sockets=live)
        options = render(
            profile,
            facts,
            bwrap.features,
            seccomp_fd=seccomp_fd,
            pin_fds=pin_fds,
            info_fd=info_write,
            sealed=sealed,
            fork_server=fork_server is not None,
            excludes_fd=excludes_fd,
            throwaway_fds=throwaway_fds,
        )
        block_write: int | None = None
        if profile.egress is not None or live:
            # live sockets: open_launch learns that bwrap made its mounts (`_built`)
            block_read, block_write = os.pipe2(os.O_CLOEXEC)
            opened.add(block_write)
            options += ["--block-fd", str(track(block_read))]
        args_fd = track(memfd("governor-bwrap-args", "\0".join(options).encode() + b"\0"))
        # limits (governor.sandbox.host.limits): rlimits set inside, once bwrap made the user
        # namespace (a fork server sets them per command); root's pids group
        inside = () if fork_server is not None else command_prefix(profile.limits)
        budget = attempt_budget()
        outside = (
            launcher(profile.limits, stack)
            if budget is None
            else (
                *budget.joining(),  # the attempt's memory group first, then its pids group
                *launcher(profile.limits, stack, budget.group, budget.group_ending),
            )
        )
        yield Launch(
            argv=(*outside, bwrap.path, "--args", str(args_fd), "--", *inside, *command),
            pass_fds=tuple(fds),
            env={},
            cwd="/",  # never the governor's own cwd (a project): bwrap chdirs inside
            new_session=False,
            sandboxed=True,
            info_fd=info_read,
            block_fd=block_write,
            proxied=profile.egress is not None,
            sockets=live,
            _open=opened,
        )


def acquire_stubs(
    ledger: StubLedger, pins: Sequence[str], stubs: Sequence[str], stack: ExitStack
) -> set[str]:
    """Make the stubs among ``pins`` and count this sandbox's use of them until
    ``stack`` closes; the ones that are sealed (they need no mount).

    A pin that is one of our stubs (made for another sandbox still running, or
    parked) is counted too, or that sandbox's end would delete a mount point
    this one relies on. Another governor's sealed stub (or one it left behind)
    is shared the same way.
    """
    counted: list[str] = []
    sealed: set[str] = set()
    stack.callback(_release, ledger, counted)
    missing = set(stubs)
    for pin in pins:
        ours = (pin in missing or ledger.owns(pin)) and ledger.acquire(pin)
        if ours or ledger.adopt(pin):
            counted.append(pin)
            if ledger.sealed(pin):
                sealed.add(pin)
    ledger.commit()
    return sealed


def _release(ledger: StubLedger, paths: list[str]) -> None:
    for path in reversed(paths):
        ledger.release(path)


def _close_open(opened: set[int]) -> None:
    for fd in list(opened):
        opened.discard(fd)
        os.close(fd)


Attach = Callable[[int], Awaitable[None]]
"""Makes the proxy's listeners in the network namespace of a sandbox's pid 1."""

_CHILD_PID = re.compile(rb'"child-pid"\s*:\s*(\d+)')
INFO_MAX_BYTES = 64 * 1024
INFO_GRACE = 5.0


async def _read_info(stream: trio.lowlevel.FdStream, buffer: bytearray) -> None:
    while len(buffer) < INFO_MAX_BYTES:
        data = await stream.receive_some(4096)
        if not data:
            return
        buffer += data


async def _last_words(child: Child) -> str:
    """The last line bwrap wrote on a piped stderr before it exited (for an error
    message), or ""; waits a second at most."""
    if child.stderr is None:
        return ""
    text = b""
    with trio.move_on_after(1):
        while len(text) < 4096:
            data = await child.stderr.receive_some(4096)
            if not data:
                break
            text += data
    lines = [line for line in text.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


async def _built(block_fd: int, child: Child) -> None:
    """Let bwrap go on past ``--block-fd`` and wait until it has read from it:
    it reads there after its last mount, so then every cover it was asked for
    is in place. If it exits first (a mount failed: a host socket removed
    since the survey leaves no mount point on the read-only ``/``), raise what
    it said (`governor.sandbox.host.bwrap.failure_of`: a `SandboxStartFailed` naming its
    line), from the output it shares with the command that never ran.

    How it is told apart: the pipe is made one page big and filled, so our end
    becomes "writable" only when no reader is left (bwrap's child closes its
    end right after reading one byte; our copy was closed at the spawn, the
    monitor's when it began). What is left in the pipe then says which: a byte
    less, read; all of it, bwrap gone before reading."""
    fcntl.fcntl(block_fd, F_SETPIPE_SZ, resource.getpagesize())
    os.set_blocking(block_fd, False)
    put = 0
    try:
        while True:
            put += os.write(block_fd, b"x" * resource.getpagesize())
    except BlockingIOError:
        pass  # full
    except BrokenPipeError:
        return await _check_read(block_fd, put, child)  # no reader left already
    while True:
        await trio.lowlevel.wait_writable(block_fd)
        try:
            put += os.write(block_fd, b"x")  # room: only if something else read
        except BrokenPipeError:
            break
        except BlockingIOError:
            continue
    await _check_read(block_fd, put, child)


async def _check_read(block_fd: int, put: int, child: Child) -> None:
    """Return if bwrap read from the ``put`` bytes it was given, else raise what it said."""
    left = array.array("i", [0])
    fcntl.ioctl(block_fd, termios.FIONREAD, left)
    if left[0] < put:
        return
    text = await _all_words(child)
    if bwrap_line(text) is None and child.stderr is None and child.stdout is None:
        # its stdio was the caller's own (`governor sandbox`): its words went there
        raise SandboxStartFailed(
            "the sandbox could not be built: bwrap exited before its command ran "
            "(its own words are on its stderr)"
        )
    raise failure_of(text, "the sandbox")


F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


def _no_reader(block_fd: int) -> bool:
    """Whether no process holds the read end of bwrap's ``--block-fd`` any more."""
    poller = select.poll()
    poller.register(block_fd, select.POLLOUT)
    return any(revents & select.POLLERR for _, revents in poller.poll(0))


async def _all_words(child: Child) -> str:
    """What a bwrap that exited before its command ran wrote (its stderr, or the
    output the command would have shared), up to 4 KiB."""
    stream = child.stderr if child.stderr is not None else child.stdout
    text = b""
    if stream is not None:
        with trio.move_on_after(1), contextlib.suppress(trio.ClosedResourceError):
            while len(text) < 4096:
                data = await stream.receive_some(4096)
                if not data:
                    break
                text += data
    return text.decode("utf-8", "replace")


async def open_launch(
    launch: Launch,
    *,
    stdin: Std = DEVNULL,
    stdout: Std = PIPE,
    stderr: Std = STDOUT,
    attach: Attach | None = None,
) -> Child:
    """Spawn ``launch`` (on the trio thread) and, when sandboxed, learn the host
    pid of the sandbox's pid 1 before returning.

    A launch behind the proxy (``block_fd``) waits, before its command starts,
    for ``attach(pid)`` to make its listeners (`governor.sandbox.net.proxy`); required then.
    A launch that covers host sockets returns only once bwrap has made its
    mounts, and raises `SandboxStartFailed` (bwrap's line) if it could not
    (`_built`; `launched` makes it again when a socket vanished).

    Why: bwrap's pid 1 arms ``--die-with-parent`` only after its whole mount
    setup. SIGKILLing bwrap during those milliseconds orphans pid 1 and the
    command runs on, unowned (seen here: a terminal released right after
    ``create``). With pid 1's pid (from ``--info-fd``, written before pid 1 is
    let go) a kill reaches the namespace directly, at any moment.
    """
    child = spawn(
        launch.argv,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        pass_fds=launch.pass_fds,
        env=launch.env,
        cwd=launch.cwd,
        start_new_session=launch.new_session,
    )
    launch.spawned()
    budget = attempt_budget() if launch.sandboxed else None
    if budget is not None:  # counted from its start: a sandbox killed at once is reaped
        budget.add(child)
    if launch.info_fd is None:
        return child
    launch._open.discard(launch.info_fd)
    stream = trio.lowlevel.FdStream(launch.info_fd)
    buffer = bytearray()
    try:
        try:
            await _read_info(stream, buffer)
        except BaseException:
            with trio.CancelScope(shield=True, deadline=trio.current_time() + INFO_GRACE):
                await _read_info(stream, buffer)
            raise
        finally:
            match = _CHILD_PID.search(buffer)
            if match is not None:
                child.adopt_inner(int(match.group(1)))
            with trio.CancelScope(shield=True):
                await stream.aclose()
        if launch.block_fd is not None:
            if launch.proxied and attach is None:
                raise ProfileError("a sandbox behind the proxy needs its listeners attached")
            if match is None:
                why = await _last_words(child)
                raise ProfileError(f"the sandbox did not start{': ' + why if why else ''}")
            if launch.proxied and attach is not None:
                try:
                    await attach(int(match.group(1)))
                except Exception:
                    if launch.sockets:
                        # bwrap dying before its command (a cover it could not
                        # make) takes its namespace from under the listeners; it
                        # may not have let go of its block fd yet: wait for it,
                        # then say why (`vanished` tells the race from the rest)
                        with trio.move_on_after(INFO_GRACE):
                            await child.wait()
                        if child.returncode is not None or _no_reader(launch.block_fd):
                            text = await _all_words(child)
                            if bwrap_line(text) is not None:
                                raise failure_of(text, "the sandbox") from None
                            gone = next((s for s in launch.sockets if not os.path.lexists(s)), None)
                            if gone is not None:  # its words elsewhere: the socket it covered
                                raise SandboxStartFailed(
                                    f"the sandbox could not be built: {gone} went away"
                                ) from None
                    raise
            launch._open.discard(launch.block_fd)
            try:
                if launch.sockets:
                    await _built(launch.block_fd, child)
                else:
                    os.write(launch.block_fd, b"x")
            finally:
                os.close(launch.block_fd)
    except BaseException:
        with trio.CancelScope(shield=True):
            child.kill()
            await child.wait()
            await child.aclose()
        raise
    return child


def vanished(error: SandboxStartFailed, launch: Launch) -> str | None:
    """The host socket ``launch`` covered that bwrap's line in ``error`` says it
    could not make a mount point for (it was removed after the check in
    `prepare`), or None: another failure, not the race of a vanishing socket.
    Where bwrap's words did not come back (its stderr the caller's), a covered
    socket that is no longer there."""
    text = str(error)
    if bwrap_line(text) is None:  # its words went elsewhere: a covered socket that is gone
        return next((s for s in launch.sockets if not os.path.lexists(s)), None)
    return next((s for s in launch.sockets if f"Can't create file at {s}: " in text), None)


async def launched(
    stack: ExitStack,
    make: Callable[[], AbstractContextManager[Launch]],
    start: Callable[[Launch], Awaitable[T]],
) -> T:
    """``start(launch)`` for a launch ``make`` prepares, kept open on ``stack``
    once started; made again, once, from a fresh survey, if bwrap failed on a
    host socket removed between the survey and its mount (`vanished`).

    Why a retry, not a cover that needs no mount point: bwrap can put
    ``/dev/null`` only on a path that exists (the ``-try`` forms spare a
    missing *source*, never a missing destination), and it cannot make one on
    the read-only ``/``. The retry's survey scans anew, so every socket that is
    there then is covered: nothing that exists when the sandbox starts is left
    reachable. A second failure is raised as it is."""
    for again in (True, False):
        with ExitStack() as attempt:
            launch = attempt.enter_context(make())
            try:
                started = await start(launch)
            except SandboxStartFailed as exc:
                if not again or vanished(exc, launch) is None:
                    raise
            else:
                stack.enter_context(attempt.pop_all())
                return started
        forget()
    raise AssertionError("unreachable")
