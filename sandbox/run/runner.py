"""Run one command under a profile, with trio: bounded output, timeout, tree kill.

The caller has already decided the command may run (the policy engine); this
module only provides the mechanism. `run` is the one-shot form; `start` is the
async context manager the ACP terminals build on, which guarantees the process
is killed (if still running) and reaped however its block is left.
"""

from __future__ import annotations

import math
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass

import trio

from governor.sandbox.plan.profile import Profile
from governor.sandbox.run.execution import Execution, ExitStatus, start_launch
from governor.sandbox.run.launch import Attach, Launch, launched, prepare
from governor.sandbox.run.preflight import preflight
from governor.sandbox.run.stubs import LEDGER, StubLedger

DEFAULT_OUTPUT_LIMIT = 1024 * 1024
"""ACP's ``outputByteLimit`` when the agent gives none: 1 MiB."""

SHELL = "/bin/sh"


@dataclass(frozen=True)
class Command:
    """An argv to execute. Build it with `argv`, `shell` or `from_acp`."""

    argv: tuple[str, ...]

    @classmethod
    def of(cls, argv: Sequence[str]) -> Command:
        if not argv:
            raise ValueError("a command needs at least a program name")
        return cls(tuple(argv))

    @classmethod
    def shell(cls, line: str) -> Command:
        """A whole shell line, run by ``/bin/sh -c``."""
        return cls((SHELL, "-c", line))

    @classmethod
    def from_acp(cls, command: str, args: Sequence[str] = ()) -> Command:
        """ACP ``terminal/create``: claude-code-acp sends the whole shell line in
        ``command`` with no ``args``, so no args means a shell line; with args,
        ``command`` is the program."""
        return cls.shell(command) if not args else cls.of([command, *args])


@dataclass(frozen=True)
class RunResult:
    """The end of one command: status, the newest output bytes, and flags."""

    status: ExitStatus
    output: bytes
    truncated: bool
    timed_out: bool
    total_bytes: int

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")


@asynccontextmanager
async def start(
    command: Command,
    profile: Profile,
    *,
    output_limit: int = DEFAULT_OUTPUT_LIMIT,
    bwrap: str | os.PathLike[str] | None = None,
    ledger: StubLedger = LEDGER,
    attach: Attach | None = None,
) -> AsyncIterator[Execution]:
    """Start ``command``; the block owns it. Leaving the block kills and reaps it
    if it is still running, and removes the stubs made for it.

    Raises `governor.sandbox.host.bwrap.BwrapUnavailable` for a sandboxed profile on a machine
    where bwrap cannot work (fail closed) and `governor.sandbox.plan.profile.ProfileError` for
    a profile that cannot be rendered safely. A profile behind the proxy needs
    ``attach`` (`governor.sandbox.run.launch.open_launch`).
    """
    probed = await preflight(bwrap) if profile.sandboxed else None

    async def begin(launch: Launch) -> Execution:
        return await start_launch(
            launch, output_limit=output_limit, limits=profile.limits, attach=attach
        )

    with ExitStack() as stack:
        execution = await launched(
            stack, lambda: prepare(profile, command.argv, probed, ledger=ledger), begin
        )
        try:
            yield execution
        finally:
            await execution.reap()


async def run(
    command: Command,
    profile: Profile,
    *,
    timeout: float | None = None,
    output_limit: int = DEFAULT_OUTPUT_LIMIT,
    bwrap: str | os.PathLike[str] | None = None,
    ledger: StubLedger = LEDGER,
) -> RunResult:
    """Run ``command`` to completion (or until ``timeout`` seconds, then kill the tree)."""
    async with start(
        command, profile, output_limit=output_limit, bwrap=bwrap, ledger=ledger
    ) as execution:
        with trio.move_on_after(math.inf if timeout is None else timeout) as scope:
            await execution.finish()
        if scope.cancelled_caught:
            execution.kill()
            with trio.CancelScope(shield=True):
                await execution.finish()
        status = await execution.wait()
    output, truncated = execution.ring.snapshot()
    return RunResult(
        status=status,
        output=output,
        truncated=truncated,
        timed_out=scope.cancelled_caught,
        total_bytes=execution.ring.total,
    )
