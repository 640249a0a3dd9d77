"""Everything between a profile and a spawn: survey, stubs, fds, the final argv.

`prepare` is a context manager because what it creates must outlive the spawn
and be undone after the process ends: stubs for missing protected paths (see
`sandbox.stubs`) and the descriptors bwrap reads.

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

import functools
import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from sandbox import seccomp
from sandbox.bwrap import Bwrap
from sandbox.profile import HostFacts, Profile, ProfileError, environment, render
from sandbox.stubs import LEDGER, StubLedger
from sandbox.survey import caller_home, survey


@dataclass(frozen=True)
class Launch:
    """How to start one process: argv, fds to hand over, environment, cwd, session."""

    argv: tuple[str, ...]
    pass_fds: tuple[int, ...]
    env: dict[str, str]
    cwd: str | None
    new_session: bool
    sandboxed: bool


@functools.cache
def _filter(allow_unix_sockets: bool) -> bytes:
    return seccomp.build(allow_unix_sockets=allow_unix_sockets)


def _memfd(name: str, data: bytes) -> int:
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


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def _open_pin(path: str) -> int:
    """An ``O_PATH|O_NOFOLLOW`` descriptor of ``path``, refusing a symlink."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise ProfileError(f"cannot open protected path {path}: {exc.strerror}") from None
    if stat.S_ISLNK(os.fstat(fd).st_mode):
        os.close(fd)
        raise ProfileError(f"protected path {path} turned into a symlink; refusing to run")
    return fd


@contextmanager
def prepare(
    profile: Profile,
    command: Sequence[str],
    bwrap: Bwrap | None,
    *,
    facts: HostFacts | None = None,
    ledger: StubLedger = LEDGER,
) -> Iterator[Launch]:
    """Build the `Launch` for ``command`` under ``profile``; undo it on exit.

    Full-access needs no bwrap: the command runs as is, in its own session
    (so the runner can kill its process group), with the declared environment.
    """
    if not command:
        raise ProfileError("empty command")
    if not profile.sandboxed:
        cwd = os.path.realpath(profile.cwd if profile.cwd is not None else profile.workspace)
        home = str(profile.home) if profile.home is not None else caller_home(os.getuid())
        env = environment(
            profile,
            HostFacts(home=None, home_env=home, uid=os.getuid(), roots=(), cwd=cwd),
        )
        yield Launch(tuple(command), (), env, cwd, True, False)
        return
    if bwrap is None:
        raise ProfileError("a sandboxed run needs a probed bwrap (see sandbox.preflight)")
    facts = facts if facts is not None else survey(profile)
    with ExitStack() as stack:
        fds: list[int] = []
        stack.callback(_close_all, fds)
        if profile.writable:
            # A pin that is one of our stubs (made for another sandbox still
            # running, or parked) is counted too, or that sandbox's end would
            # delete a mount point this one relies on.
            for pin in facts.pins:
                if (pin in facts.stubs or ledger.owns(pin)) and ledger.acquire(pin):
                    stack.callback(ledger.release, pin)
        pin_fds: dict[str, int] = {}
        if bwrap.features.ro_bind_fd and profile.writable:
            for pin in facts.pins:
                fd = _open_pin(pin)
                fds.append(fd)
                pin_fds[pin] = fd
        seccomp_fd = _memfd("governor-seccomp", _filter(profile.allow_unix_sockets))
        fds.append(seccomp_fd)
        options = render(profile, facts, bwrap.features, seccomp_fd=seccomp_fd, pin_fds=pin_fds)
        args_fd = _memfd("governor-bwrap-args", b"".join(o.encode() + b"\0" for o in options))
        fds.append(args_fd)
        yield Launch(
            argv=(bwrap.path, "--args", str(args_fd), "--", *command),
            pass_fds=tuple(fds),
            env={},
            cwd=None,
            new_session=False,
            sandboxed=True,
        )
