"""ACP terminals: commands started in the background, polled, waited, killed, released.

The mechanism behind ``terminal/create``, ``terminal/output``,
``terminal/wait_for_exit``, ``terminal/kill`` and ``terminal/release``. The
policy decision is the caller's and comes *before* `Terminals.create`: a refused
command never reaches this module.

Each terminal is one task in a nursery the caller owns, so no command outlives
the attempt that started it; `Terminals.close` kills whatever is still running.
Sandboxed commands run in the session's one sandbox (`governor.sandbox.run.session`), built
at the first command and ended by `Terminals.close`; a sandbox that ended on
its own (killed from outside) is built again for the next command. If the
session's sandbox cannot be built at all while bwrap itself works (its fork
server did not start: an interpreter that cannot run inside, say), commands
get a bwrap of their own instead, as strong and slower, and `Terminals.fallback`
says why. While the manager is open it holds the stub ledger
(`governor.sandbox.run.stubs`), so the placeholders for missing protected paths are made
once per session, not once per command.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

import trio

from governor.sandbox.plan.profile import Profile
from governor.sandbox.run.execution import Execution, ExitStatus
from governor.sandbox.run.launch import Attach
from governor.sandbox.run.runner import DEFAULT_OUTPUT_LIMIT, Command, start
from governor.sandbox.run.session import SandboxSession, SessionEnded, SessionError
from governor.sandbox.run.stubs import LEDGER, StubLedger


class UnknownTerminal(LookupError):
    """No such terminal (never created, or released). ACP maps this to -32002."""

    def __init__(self, terminal_id: str) -> None:
        super().__init__(f"unknown terminal {terminal_id!r}")
        self.terminal_id = terminal_id


class TerminalsClosed(RuntimeError):
    """`Terminals.create` after `Terminals.close`."""


class TerminalOutput(NamedTuple):
    """What ``terminal/output`` answers: ``(output, truncated, exit_status)``."""

    output: str
    truncated: bool
    exit_status: ExitStatus | None


class Terminals:
    """The terminals of one session, all running under ``profile``."""

    def __init__(
        self,
        nursery: trio.Nursery,
        profile: Profile,
        *,
        bwrap: str | os.PathLike[str] | None = None,
        ledger: StubLedger = LEDGER,
        attach: Attach | None = None,
    ) -> None:
        self._nursery = nursery
        self._attach = attach
        """Makes the proxy's listeners in each sandbox behind it (``profile.egress``)."""
        self._profile = profile
        self._bwrap = bwrap
        self._terminals: dict[str, Execution] = {}
        self._closed = False
        self._stack = ExitStack()
        self._ledger = ledger
        self._stack.enter_context(ledger.hold((profile.workspace, *profile.extra_roots)))
        self._session: SandboxSession | None = None
        self._session_lock = trio.Lock()
        self.fallback: str | None = None
        """Why commands run in a bwrap each instead of the session's sandbox."""

    async def __aenter__(self) -> Terminals:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def create(
        self,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        output_byte_limit: int | None = None,
        on_exit: Callable[[Execution], None] | None = None,
    ) -> str:
        """Start the command and return its terminal id once it is running;
        ``on_exit`` is told of the command's end (its status and output), once,
        whether or not the terminal was released before (the caller's record of
        what came of it: this module knows no log).

        Raises `governor.sandbox.plan.profile.ProfileError` (bad cwd, bad env name) or
        `governor.sandbox.host.bwrap.BwrapUnavailable` without starting anything.
        """
        if self._closed:
            raise TerminalsClosed("the terminals of this session are closed")
        limit = DEFAULT_OUTPUT_LIMIT if output_byte_limit is None else output_byte_limit
        if limit < 0:
            raise ValueError(f"outputByteLimit must be >= 0, got {limit}")
        profile = self._profile.with_command(
            cwd=Path(cwd) if cwd is not None else None, env=env
        )
        execution: Execution = await self._nursery.start(
            self._run, Command.from_acp(command, args), profile, limit, on_exit
        )
        terminal_id = f"term_{secrets.token_hex(8)}"
        self._terminals[terminal_id] = execution
        return terminal_id

    async def _run(
        self,
        command: Command,
        profile: Profile,
        limit: int,
        on_exit: Callable[[Execution], None] | None = None,
        task_status: trio.TaskStatus[Execution] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        began = False
        for last_try in (False, True):
            session = await self._shared_session() if profile.sandboxed else None
            if session is None:
                starting = start(
                    command, profile, output_limit=limit, bwrap=self._bwrap,
                    ledger=self._ledger, attach=self._attach,
                )  # fmt: skip
            else:
                starting = session.start(command.argv, profile, output_limit=limit)
            try:
                async with starting as execution:
                    began = True
                    task_status.started(execution)
                    await execution.finish()
                    if on_exit is not None:
                        on_exit(execution)
                return
            except SessionEnded:
                # the sandbox was gone before the command started: once more in a new one
                if last_try or began:
                    raise

    async def _shared_session(self) -> SandboxSession | None:
        """The session's sandbox, built (again) when there is none running; None
        when it cannot be built but bwrap works (see `fallback`)."""
        async with self._session_lock:
            if self._closed:
                raise TerminalsClosed("the terminals of this session are closed")
            if self.fallback is not None:
                return None
            if self._session is not None and self._session.ended:
                await self._session.aclose()
                self._session = None
            if self._session is None:
                session = SandboxSession(
                    self._profile, bwrap=self._bwrap, ledger=self._ledger, attach=self._attach
                )
                try:
                    await session.open()
                except SessionError as exc:
                    self.fallback = str(exc)
                    return None
                self._session = session
            return self._session

    def _get(self, terminal_id: str) -> Execution:
        try:
            return self._terminals[terminal_id]
        except KeyError:
            raise UnknownTerminal(terminal_id) from None

    def output(self, terminal_id: str) -> TerminalOutput:
        """The newest output so far, whether older output was dropped, and the
        exit status once the command has ended."""
        execution = self._get(terminal_id)
        text, truncated = execution.ring.text(final=execution.status is not None)
        return TerminalOutput(text, truncated, execution.status)

    async def wait_for_exit(self, terminal_id: str) -> ExitStatus:
        """Wait for the command to end (a kill ends it too)."""
        return await self._get(terminal_id).wait()

    def kill(self, terminal_id: str) -> None:
        """Kill the command's whole tree; the terminal and its output stay valid."""
        self._get(terminal_id).kill()

    async def release(self, terminal_id: str) -> None:
        """Kill the command if it still runs and forget the terminal (its id is
        invalid afterwards)."""
        execution = self._get(terminal_id)
        del self._terminals[terminal_id]
        execution.kill()
        await execution.wait()

    async def close(self) -> None:
        """Kill every command and wait for them; later `create` calls fail."""
        if self._closed:
            return
        self._closed = True
        executions = list(self._terminals.values())
        self._terminals.clear()
        for execution in executions:
            execution.kill()
        with trio.CancelScope(shield=True):
            for execution in executions:
                await execution.wait()
            async with self._session_lock:
                if self._session is not None:
                    await self._session.aclose()
                    self._session = None
        self._stack.close()

    def __len__(self) -> int:
        return len(self._terminals)

    def __contains__(self, terminal_id: object) -> bool:
        """Whether `terminal_id` names a terminal of this session (created, not
        released): a lookup, where `output` would render its whole buffer."""
        return terminal_id in self._terminals
