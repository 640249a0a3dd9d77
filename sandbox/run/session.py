"""One sandbox per session, built once, with every command forked inside it.

Why: a bwrap per command costs bwrap's own start plus a re-read of the mount
table per mount, and a governor that cannot seal the placeholders for missing
protected names (not root: `governor.sandbox.run.stubs`) needs over 30 read-only pins for a
git workspace. That made a command about twice the cost of a minimal bwrap
(bench/README.md has the figures). A session instead starts one bwrap
with the full profile (pins and all) around `governor.sandbox.standalone.forkserver`, which keeps
the next command's PID and mount namespaces ready: a command costs a request
over a socket and a spawn (see that module for what each process does).

What a command gets is what a bwrap of its own gave it: the same mounts, pins
and masks, a fresh ``/proc`` showing only its own processes, no capability,
``no_new_privs``, the same seccomp filter, a new session, exactly the declared
environment, and the end of its whole process tree when it ends or is killed.
What differs, on purpose: ``/tmp``, ``/var/tmp`` and the empty ``$HOME`` are
the session's, shared by its commands (as in a terminal) and still private from
the host and from other sessions.

The workspace can change between commands. Each command's survey is compared
with the session's: a nested repository or a secret file that appeared since
is pinned or masked in that command's own mount namespace; the server checks
each path against the governor's ``O_PATH`` descriptor of it (same device and
inode) before it mounts there. The placeholders such a repository's git dir
needs (its missing ``modules``, ``commondir``, ...) are made for that command
and counted until it ends, as a bwrap of its own would. Protected names at the
top of a root are all pinned from the start, existing or not. The host sockets
the survey found outside ``/run`` (`governor.sandbox.host.sockets`) are found once, for the
sandbox; one that its daemon made again since (a restart) is covered again in
each command's namespace, since the kernel detached the session's cover from
the old one.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import replace
from pathlib import Path
from stat import S_ISSOCK

import trio

from governor.policies.paths import is_under
from governor.sandbox.host.bwrap import Bwrap, BwrapUnavailable, SandboxStartFailed, failure_of
from governor.sandbox.host.limits import rlimits
from governor.sandbox.host.sockets import forget
from governor.sandbox.host.survey import survey
from governor.sandbox.plan.bwrap_argv import environment, validate
from governor.sandbox.plan.profile import HostFacts, Profile, ProfileError
from governor.sandbox.run.capture import OutputRing
from governor.sandbox.run.execution import Execution
from governor.sandbox.run.launch import (
    Attach,
    acquire_stubs,
    filter_program,
    memfd,
    open_launch,
    open_pin,
    prepare,
)
from governor.sandbox.run.preflight import preflight
from governor.sandbox.run.spawn import DEVNULL, PIPE, Child
from governor.sandbox.run.stubs import LEDGER, StubLedger

SERVER = Path(__file__).parent.parent / "standalone" / "forkserver.py"
READY_TIMEOUT = 30.0
"""Seconds the fork server gets to start (an interpreter start: far less, normally)."""
STDERR_MAX_BYTES = 16 * 1024
MAX_BINDS = 250
"""Per-command binds travel as descriptors in one message (the kernel allows 253)."""


class SessionError(BwrapUnavailable):
    """The session's sandbox could not start, or could not start a command: the
    command does not run (fail closed, as when bwrap itself cannot work)."""


class SessionEnded(SessionError):
    """The session's sandbox is gone (killed, or its server died)."""


def interpreter() -> tuple[str, tuple[Path, ...]]:
    """The interpreter that runs the fork server and the paths that keep it
    working inside the sandbox: its install, when it lies where the sandbox
    puts a tmpfs (pyenv or uv under ``$HOME``, a CI Python under ``/tmp``)."""
    exe = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    keep = [prefix] if not is_under(prefix, "/usr") else []
    if not is_under(exe, prefix) and not is_under(exe, "/usr"):
        keep.append(os.path.dirname(exe))
    return exe, tuple(Path(p) for p in keep)


class SessionChild:
    """One command started by the fork server: its output pipe, its end and its
    kill. Quacks like `governor.sandbox.run.spawn.Child` for `governor.sandbox.run.execution.Execution`."""

    group = False

    def __init__(self, reply: socket.socket, stdout: trio.lowlevel.FdStream) -> None:
        self._reply: socket.socket | None = reply
        self.stdout: trio.lowlevel.FdStream | None = stdout
        self._pidfd: int | None = None
        self.returncode: int | None = None

    async def started(self) -> None:
        """Wait for the server's word: the command's pid 1 is running, or why not."""
        message, fds = await self._receive()
        if message == b"started" and len(fds) == 1:
            self._pidfd = fds[0]
            return
        for fd in fds:
            os.close(fd)
        if message.startswith(b"error "):
            raise SessionError(
                "the session's sandbox could not start the command: "
                + message[6:].decode("utf-8", "replace")
            )
        raise SessionEnded("the session's sandbox ended before the command started")

    async def _receive(self) -> tuple[bytes, list[int]]:
        assert self._reply is not None
        await trio.lowlevel.wait_readable(self._reply)
        fds = array.array("i")
        message, ancillary, _flags, _addr = self._reply.recvmsg(
            256, socket.CMSG_SPACE(fds.itemsize)
        )
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
        return message, list(fds)

    async def wait(self) -> int:
        """The command's end, as `subprocess` reports it (negative for a signal).
        Safe to call again, and to cancel."""
        while self.returncode is None:
            message, fds = await self._receive()
            for fd in fds:  # a late `started`: the command was killed before it began
                os.close(fd)
            if message.startswith(b"exit "):
                self.returncode = os.waitstatus_to_exitcode(int(message[5:]))
            elif not message:
                # the server's process for this command is gone: the session
                # was killed or ended, and the command with it
                self.returncode = -signal.SIGKILL
        self._close_pidfd()
        return self.returncode

    def kill(self) -> None:
        """SIGKILL the command's pid 1: the kernel ends its whole namespace.

        Before the server has said ``started`` there is no pid 1 to name yet:
        shutting our end of the reply socket makes the server's side kill it
        (or never start it), and `wait` then reads the end of the socket."""
        if self.returncode is not None:
            return
        if self._pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        elif self._reply is not None:
            with contextlib.suppress(OSError):
                self._reply.shutdown(socket.SHUT_RDWR)

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    async def aclose(self) -> None:
        """Close our ends. Closing the reply socket also makes the server kill
        the command if it still runs (nothing runs on unowned)."""
        self._close_pidfd()
        if self._reply is not None:
            trio.lowlevel.notify_closing(self._reply)
            self._reply.close()
            self._reply = None
        if self.stdout is not None:
            await self.stdout.aclose()


class SandboxSession:
    """The sandbox of one session under ``profile`` (its cwd and environment
    come with each command). Open it with ``async with``; `start` runs commands."""

    def __init__(
        self,
        profile: Profile,
        *,
        bwrap: str | os.PathLike[str] | None = None,
        ledger: StubLedger = LEDGER,
        attach: Attach | None = None,
    ) -> None:
        if not profile.sandboxed:
            raise ProfileError("a full-access profile has no sandbox to share")
        self._profile = profile
        self._bwrap = bwrap
        self._ledger = ledger
        self._attach = attach
        self._stack = ExitStack()
        self._control: socket.socket | None = None
        self._child: Child | None = None
        self._facts: HostFacts | None = None
        self._sockets: dict[str, tuple[int, int, int] | None] = {}
        """The host sockets the sandbox covers, as they were when it was built."""
        self._broken = False
        self._covering: tuple[str, ...] = ()
        """The host sockets the last bwrap started was to cover."""

    async def __aenter__(self) -> SandboxSession:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def ended(self) -> bool:
        """Whether the session's sandbox is known to be gone (or was never opened)."""
        return self._broken or self._child is None or self._child.returncode is not None

    async def open(self) -> None:
        """Build the sandbox and wait for the fork server's ``ready``.

        Raises `governor.sandbox.host.bwrap.BwrapUnavailable` where bwrap cannot work and
        `SessionError` (with bwrap's or Python's own words) if the server does
        not come up.
        """
        probed = await preflight(self._bwrap)
        exe, keep = interpreter()
        profile = replace(self._profile, visible=(*self._profile.visible, *keep))
        try:
            await self._build(probed, exe, profile)
        except SandboxStartFailed as exc:
            # a host socket removed between the survey and bwrap's mount: again,
            # from a fresh survey (`governor.sandbox.run.launch.launched` says why)
            if not any(f"Can't create file at {s}: " in str(exc) for s in self._covering):
                raise
            forget()
            await self._build(probed, exe, profile)

    async def _build(self, probed: Bwrap, exe: str, profile: Profile) -> None:
        facts = survey(profile)
        control, remote = socket.socketpair(
            socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC
        )
        with ExitStack() as handed:
            handed.callback(remote.close)
            program = memfd("governor-seccomp", filter_program(profile.unix_sockets))
            handed.callback(os.close, program)
            script = memfd("governor-forkserver", SERVER.read_bytes())
            handed.callback(os.close, script)
            argv = (
                exe, "-I", "-S", "-B", f"/proc/self/fd/{script}",
                str(remote.fileno()), str(program),
            )  # fmt: skip
            try:
                launch = self._stack.enter_context(
                    prepare(
                        profile,
                        argv,
                        probed,
                        facts=facts,
                        ledger=self._ledger,
                        fork_server=(remote.fileno(), program, script),
                    )
                )
                self._covering = launch.sockets
                child = await open_launch(
                    launch, stdin=DEVNULL, stdout=DEVNULL, stderr=PIPE, attach=self._attach
                )
            except BaseException:
                control.close()
                self._stack.close()
                raise
        self._control = control
        self._child = child
        self._facts = facts
        self._sockets = {path: _socket_identity(path) for path in facts.sockets}
        try:
            with trio.move_on_after(READY_TIMEOUT) as waited:
                await trio.lowlevel.wait_readable(control)
            ready = b"" if waited.cancelled_caught else control.recv(16)
        except BaseException:  # cancelled from outside: nothing to report
            await self.aclose()
            raise
        if ready != b"ready":
            reason = await self._reason_and_close()
            late = f" within {READY_TIMEOUT:.0f} s" if waited.cancelled_caught else ""
            raise SessionError(f"the session's sandbox did not start{late}: {reason}")
        if child.stderr is not None:
            await child.stderr.aclose()
            child.stderr = None

    async def _reason_and_close(self) -> str:
        child = self._child
        text = b""
        if child is not None and child.stderr is not None:
            with trio.move_on_after(1), contextlib.suppress(trio.ClosedResourceError):
                while len(text) < STDERR_MAX_BYTES:
                    data = await child.stderr.receive_some(4096)
                    if not data:
                        break
                    text += data
        await self.aclose()
        reason = text.decode("utf-8", "replace").strip()
        if "bwrap:" in reason:  # bwrap's own word, or a shell's on a bwrap gone ("bwrap: not found")
            failure = failure_of(reason, "the session's sandbox")
            raise failure if isinstance(failure, SandboxStartFailed) else BwrapUnavailable(reason)
        return reason or "no word from bwrap or the fork server"

    async def aclose(self) -> None:
        """End the sandbox and everything still running in it; release the stubs."""
        with trio.CancelScope(shield=True):
            if self._control is not None:
                self._control.close()
                self._control = None
            child, self._child = self._child, None
            if child is not None:
                child.kill()
                await child.wait()
                await child.aclose()
            self._stack.close()

    @asynccontextmanager
    async def start(
        self, command: tuple[str, ...], profile: Profile, *, output_limit: int
    ) -> AsyncIterator[Execution]:
        """Start ``command`` under ``profile`` (this session's, with the command's
        cwd and environment); the block owns it. Leaving the block kills and
        reaps it if it is still running.

        Raises `governor.sandbox.plan.profile.ProfileError` (bad cwd, bad env name, too many
        new paths to pin), `SessionEnded` when the sandbox is gone, and
        `SessionError` when the server could not start the command.
        """
        if self._control is None or self._facts is None or self.ended:
            raise SessionEnded("the session's sandbox has ended")
        facts = survey(profile, sockets=self._facts.sockets)  # the sandbox's, once
        validate(profile, facts)
        env = environment(profile, facts)
        with ExitStack() as lasting:  # the stubs the command relies on, until it is reaped
            new_pins = [p for p in facts.pins if p not in self._facts.pins]
            if new_pins:
                acquire_stubs(self._ledger, new_pins, facts.stubs, lasting)
            with ExitStack() as handed:
                remade = [p for p, was in self._sockets.items() if _socket_identity(p) != was]
                kinds, sources = _new_binds(self._facts, facts, handed, remade)
                request = {
                    "argv": list(command),
                    "env": env,
                    "cwd": facts.cwd,
                    "binds": kinds,
                    "rlimits": rlimits(profile.limits) if profile.limits is not None else [],
                }
                read_end, write_end = os.pipe2(os.O_CLOEXEC)
                handed.callback(os.close, write_end)
                stdout = trio.lowlevel.FdStream(read_end)
                ours, theirs = socket.socketpair(
                    socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC
                )
                handed.callback(theirs.close)
                child = SessionChild(ours, stdout)
                document = memfd("governor-command", json.dumps(request).encode())
                handed.callback(os.close, document)
                fds = array.array("i", [theirs.fileno(), write_end, document, *sources])
                try:
                    self._control.sendmsg(
                        [b"run"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)]
                    )
                except OSError as exc:
                    self._broken = True
                    await child.aclose()
                    raise SessionEnded(
                        f"the session's sandbox has ended ({exc.strerror})"
                    ) from None
            execution = Execution(child, OutputRing(output_limit), profile.limits)
            try:
                try:
                    await child.started()
                except SessionEnded:
                    self._broken = True
                    raise
                yield execution
            finally:
                await execution.reap()


def _socket_identity(path: str) -> tuple[int, int, int] | None:
    """What tells a host socket from one made again at its path (a new inode,
    or the same number reused, with a later ctime); None if no socket is there."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns) if S_ISSOCK(st.st_mode) else None


def _new_binds(
    base: HostFacts, facts: HostFacts, stack: ExitStack, remade: list[str] | None = None
) -> tuple[list[tuple[str, int, str]], list[int]]:
    """What ``facts`` (a command's survey) must bind on top of the session's
    mounts (``base``), each as (kind, index of its checked descriptor, path).

    The writable self-binds come first, then the read-only ones: the server's
    binds are recursive and make only their top mount read-only, so a git dir
    opened inside a new pin (a submodule's, inside ``.git/modules``) stays
    writable inside that pin's copy, and the pins inside it come after.

    ``remade`` are host sockets the sandbox covers that changed since it was
    built: a daemon that restarts unlinks its socket and binds a new one, and
    the kernel then detaches the sandbox's ``/dev/null`` from the old one. Each
    is covered again in the command's own mounts (``mask``: left as it is
    where the cover still holds)."""
    wanted = [
        *(("rw", p) for p in facts.ancestors if p not in base.ancestors),
        *(("ro", p) for p in facts.git_dirs if p not in base.git_dirs),
        *(("ro", k.path) for k in facts.kept if k not in base.kept),
        *(("ro", p) for p in facts.pins if p not in base.pins),
        *(("null", p) for p in facts.hidden if p not in base.hidden),
        *(("mask", p) for p in remade or () if _socket_identity(p) is not None),
    ]
    if len(wanted) > MAX_BINDS:
        raise ProfileError(
            f"{len(wanted)} nested repositories, secret files and remade host sockets "
            f"appeared since the session started (at most {MAX_BINDS}); start a new session"
        )
    kinds: list[tuple[str, int, str]] = []
    sources: list[int] = []
    for kind, path in wanted:
        try:
            fd = open_pin(path)
        except ProfileError:
            if kind == "mask" and not os.path.lexists(path):
                continue  # the remade socket is gone again: nothing there to cover
            raise
        stack.callback(os.close, fd)
        kinds.append((kind, len(sources), path))
        sources.append(fd)
    return kinds, sources

