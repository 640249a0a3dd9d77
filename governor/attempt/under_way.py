"""An attempt under way: what it holds, its deadline, its limits and the end of its turn.

`UnderWay` is the state every step of `governor.attempt.lifecycle.Attempt`
shares (its audit log, gate, turn, budget and `Ending`), with the steps both
kinds of agent take: the turn's deadline (the wall, `stop`), a limit reached
(`_stop_at`: every later request refused, the turn ended as at a timeout), the
limit an agent's end names (`_blame_limit`), and the agent's shutdown. The
steps of an ACP agent are `governor.attempt.agent_session`'s, of a plain
program `governor.attempt.program_run`'s, of what changed in the roots
`governor.attempt.roots_changes`'s; the lifecycle sequences them. Like the
lifecycle, this records what happened and never decides the status.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Sequence
from typing import Any, Final

import structlog
import trio

from governor.acp.connection import Connection, ConnectionClosed
from governor.acp.jsonrpc import Malformed
from governor.agents import npm_installs as installs
from governor.attempt import paused
from governor.attempt.budget import Budget
from governor.attempt.session_setup import login_line
from governor.attempt.turn import Turn
from governor.audit.log import AuditLog, AuditUnavailable
from governor.confine import model_api
from governor.confine import sandboxes as confine
from governor.confine.workspace import Snapshot
from governor.ending.how_it_ended import CommandResult, Ending
from governor.gate.gatekeeper import Gate
from governor.gate.model_calls import ModelCalls
from governor.job.spec import Prepared
from governor.mcp import relay as mcp
from governor.policies import by as who
from governor.policies.limits import render
from governor.sandbox.host import budget as sandbox_budget
from governor.sandbox.host.limits import blame
from governor.sandbox.net.credentials import Credentials
from governor.sandbox.net.proxy import EgressProxy
from governor.sandbox.run.execution import ExitStatus
from governor.tamper import baseline as tamper

EXIT_GRACE: Final = 2.0


log = structlog.get_logger("governor.attempt.lifecycle")


class UnderWay:
    """One attempt under way: its audit log, its gate, its turn, and its `Ending`."""

    def __init__(
        self, p: Prepared, stop: trio.Event | None = None, continues: paused.Continuation | None = None
    ) -> None:
        self.prepared = p
        self.stop = stop
        self.continues = continues
        self.deadline: trio.CancelScope | None = None
        self.id = (
            continues.state.attempt
            if continues is not None
            else f"{p.executor.id}-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        )
        self.session_caps: dict[str, Any] = {}
        """What the agent advertised for going on with a session (``load``, ``resume``)."""
        self.replaying = False
        """The agent replays a loaded session's history: not folded, not tallied again."""
        self.started = time.monotonic()
        self.program_ran: tuple[int, int] | None = None
        """(start, end) in ``time.time_ns`` of a plain program's run: its changes are its work."""
        listener = p.masker.listener(p.spec.on_event)
        self.listener = listener
        self.emit = listener or (lambda kind, info: None)
        self.audit = AuditLog(
            p.log_path,
            self.id,
            durability=p.spec.durability,
            masker=p.masker,
            signer=p.signer,
            limit=p.policy.limits.log,
        )
        if continues is not None:
            self.audit.continue_chain(continues.prev, continues.seq, continues.earlier)
        self.gate: Gate | None = None
        self.terminals: confine.GovernedTerminals | None = None
        self.proxy: EgressProxy | None = None
        self.relay: mcp.McpRelay | None = None
        self.baseline: tuple[Snapshot, tamper.Baseline] | None = None
        """The attempt's start (its roots' snapshot, the tamper audit's kept files):
        this part's, or a paused attempt's first part's, kept with its state."""
        self.changed_how: list[tuple[str, str]] = []
        """The workspace diff as ``(path, how)``: a check's reads are judged against it."""
        self.refused: dict[str, tuple[str, str]] = {}
        """The agent's connections the proxy refused: host:port -> (by, reason)."""
        self.model_api: model_api.ModelApi | None = None
        """The credentials the governor holds for the agent, its CA and trust
        bundle (`governor.confine.model_api`); None: the agent holds its own."""
        self.keys = Credentials()
        """The credentials the governor holds (or withholds) for the agent."""
        self.turn = Turn(p.name, on_tool_call=self._on_tool_call, emit=listener)
        self.budget = Budget(p.policy.limits, p.name, self._stop_at)
        self.turn.on_usage = self.budget.report
        self.model_calls = ModelCalls(
            self.audit, self.budget.observed, self.budget.unread, emit=self.listener
        )
        """The model calls the proxy saw (`governor.gate.model_calls`): their
        tokens count against ``[limits] tokens``."""
        if continues is not None:  # the limits span every part: what is left, not a fresh allowance
            state = continues.state
            self.budget.carry(
                state.tool_calls, state.tokens, state.cost_usd, state.tool_call_ids, state.wire_tokens
            )
        self.end = Ending(
            agent=p.name,
            preset=p.executor.id,
            run_id=self.id,
            elapsed_s=0.0,
            timeout_s=p.wall,
            sandboxed_agent=p.sandboxed_agent,
            log=str(p.log_path) if p.log_path else None,
            workspace=p.policy.workspace,
            masker=p.masker,
        )
        self.sandboxes = sandbox_budget.AttemptBudget(None, None)
        """Every sandbox of the attempt, counted together (`governor.sandbox.host.budget`):
        the one `run` makes current while the attempt runs."""
        self._disk_watched = "the writable roots"
        """What ``[limits] workspace`` bounds in this attempt, in words (`_over_workspace`)."""
        self.auth_methods: list[Any] = []
        self.turn_over = trio.Event()
        """Set when the prompt is answered (or when the governor stops waiting for it)."""

    @property
    def name(self) -> str:
        """The agent's name in reasons and notices."""
        return self.end.agent

    @name.setter
    def name(self, value: str) -> None:
        self.end.agent = self.turn.agent = self.budget.agent = value

    async def _fetch_for_npx(self) -> None:
        """An npx preset's package fetched on the host (`installs.fetch_for_npx`)
        before its sandbox is planned, for an agent and a plain program alike."""
        p = self.prepared
        if p.executor.via_npx and p.executor.preset is not None:
            await installs.fetch_for_npx(
                installs.spec(p.executor.preset), p.executor.argv[0], p.env,
                confine.host_places(p.policy, p.executor.preset, p.env), self._fetching,
            )  # fmt: skip

    def _fetching(self, package: str) -> None:
        """A first npx start: its package is fetched before anything else shows
        (a person saw nothing for a minute)."""
        self.emit("fetching", {"agent": self.name, "package": package, "via": "npx"})

    def _on_tool_call(self, update: Any) -> None:
        """A tool call the agent reports: the gate tracks it (and reports work it
        did unasked); whoever listens sees it."""
        if self.gate is None:
            return
        state = self.gate.observe_tool_call(update)
        self.emit(
            "tool_call",
            {"id": state.id, "title": state.title, "kind": state.kind, "status": state.status},
        )

    def _deadline(self) -> trio.CancelScope:
        """The scope of the turn: it ends at the timeout, or when `stop` is set."""
        spent = self.continues.state.elapsed_s if self.continues is not None else 0.0
        self.deadline = trio.move_on_after(max(self.prepared.wall - spent, 0.0))  # the wall spans every part
        if (self.stop is not None and self.stop.is_set()) or self.end.limit is not None:
            self.deadline.cancel()
        return self.deadline

    def _over_workspace(self, total: int, closed: tuple[str, ...] = ()) -> None:
        """The roots hold more than ``[limits] workspace``, or a folder the
        governor cannot open and so cannot bound: the turn ends (`_stop_at`)."""
        limit = self.prepared.policy.limits.workspace
        assert limit is not None
        what = (
            f"{self._disk_watched.replace(' and what', ' or what')} hold a folder the governor "
            f"cannot open, {closed[0]}: "
            "what it holds cannot be bounded"
            if closed
            else f"{self._disk_watched} hold {total} bytes or more"
        )
        self._stop_at(f"workspace limit {render('workspace', limit)} ([limits] workspace: {what})")

    def _sandboxes_spent(self) -> None:
        """A last look at the budget once the sandboxes have ended: a fork the
        attempt's pids group refused (root) stops the attempt at the limit even
        when what was refused ended the agent before the watcher's next
        measure (its own failure is then the limit's doing)."""
        limit = self.sandboxes.over(self.sandboxes.measure())
        if limit is not None:
            self._stop_at(limit)

    def _stop_at(self, limit: str) -> None:
        """A limit reached (the workspace's, a budget's): recorded, every later
        request refused, and the turn ends as at a timeout, the outcome naming it."""
        if self.end.limit is not None or self.end.timed_out or self.end.interrupted:
            return  # the first reached is the reason; a turn already ending keeps its own
        self.end.limit = limit
        with contextlib.suppress(AuditUnavailable):
            self.audit.record("limit", reason=f"{self.name} was stopped at its {limit}")
        if self.gate is not None:
            self.gate.cancel()
        if self.deadline is not None:
            self.deadline.cancel()

    def _timed_out_or_interrupted(self) -> None:
        if self.end.limit is not None:
            return  # stopped at a limit: neither
        self.end.interrupted = self.stop is not None and self.stop.is_set()
        self.end.timed_out = not self.end.interrupted

    async def _watch_stop(self, stop: trio.Event) -> None:
        await stop.wait()
        if self.deadline is not None:
            self.deadline.cancel()

    async def _await_turn(self, grace: float) -> None:
        """Wait up to `grace` for the agent to answer the prompt, then stop waiting."""
        with trio.move_on_after(grace):
            await self.turn_over.wait()
        self.turn_over.set()

    async def _cancel_turn(self, conn: Connection) -> None:
        if self.gate is not None:
            self.gate.cancel()
        if self.turn.session_id is not None and not conn.closed:
            with trio.move_on_after(1):
                with contextlib.suppress(
                    ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError
                ):
                    await conn.notify("session/cancel", {"sessionId": self.turn.session_id})

    def _blame_limit(self, returncode: int | None, said: str) -> None:
        """Name the limit the agent's process stopped at, if its end says one
        (an agent the governor itself ended, at the end of its turn or at the
        wall, stopped at none)."""
        e = self.end
        if returncode is None or e.stop_reason is not None or e.timed_out or e.interrupted:
            return
        if e.limit is not None:
            return  # the governor stopped it at one (the workspace's)
        if not self.prepared.sandboxed_agent:
            return  # its limits are the sandbox's, and it had none
        status = ExitStatus.from_returncode(returncode)
        e.limit = blame(self.prepared.policy.limits, status.exit_code, status.signal, said.encode())

    async def _shutdown(self, process: Any, conn: Connection) -> None:
        """Close stdin and give the agent a moment; then SIGTERM; the sandbox's
        block SIGKILLs whatever is left of its tree."""
        with trio.move_on_after(EXIT_GRACE):
            with contextlib.suppress(Exception):  # the agent may be gone already
                await conn.close_stdin()
            await process.wait()
        if process.returncode is None:
            await terminate(process)

    # -- the processes' part of the `Ending`: written here only ------------------------

    def _failed(self, words: str) -> None:
        """What went wrong starting or talking to the agent, in its words."""
        self.end.error = words

    def _connection_ended(self, gave_up: str | None, stderr_tail: Sequence[str]) -> None:
        """The connection to an ACP agent is over: why it stopped listening, if it
        gave up on the agent, and the tail of what the agent wrote on stderr."""
        self.end.gave_up = gave_up
        self.end.stderr_tail = tuple(stderr_tail)

    def _folders_unseen(self, unseen: Sequence[str]) -> None:
        """The folder variables the agent was given whose folders its sandbox does not show."""
        self.end.unseen_folders = tuple(unseen)

    def _program_ended(self, result: CommandResult) -> None:
        """A plain program's exit code, stdout and stderr."""
        self.end.command = result

    def _needs_sign_in(self) -> None:
        self.end.sign_in = login_line(
            self.auth_methods, self.prepared.executor.preset, self.prepared.executor.argv[0]
        )
        self.end.error = f"{self.name} needs signing in: {self.end.sign_in}"

    def _rejected_at_wire(self, line: Malformed) -> None:
        """A line of the agent rejected at the wire: a ``wire`` record (its
        method when readable, its length, why; never its text), counted in the
        outcome. A refusal by the governor, so a flood of them is thinned like
        any other (`governor.audit.repeated_refusals`)."""
        e = self.end
        e.rejected_lines += 1
        if line.method is not None and len(e.rejected_methods) < 5 and line.method not in e.rejected_methods:
            e.rejected_methods = (*e.rejected_methods, line.method)
        subject: dict[str, Any] = {"length": line.length, "why": line.reason}
        if line.method is not None:
            subject["method"] = line.method
        subject["answered"] = line.reply is not None
        with contextlib.suppress(AuditUnavailable):
            self.audit.record(
                "wire",
                session=self.turn.session_id,
                verdict="deny",
                by=who.PROTOCOL,
                rule="wire",
                subject=subject,
                reason=f"the line is not a JSON-RPC message the governor can read: {line.reason}",
            )

    def _broke(self, error: Exception) -> None:
        """One of the attempt's tasks raised: the attempt still ends with its
        snapshot, end record and outcome (``failed``, naming the error), never
        a bare traceback; the traceback goes to the operational log."""
        leaves = _leaves(error)
        audit = [e for e in leaves if isinstance(e, AuditUnavailable)]
        if audit and len(audit) == len(leaves):
            self.end.error = str(audit[0])  # the gate failed closed already: its words
            return
        first = next(e for e in leaves if not isinstance(e, AuditUnavailable)) if leaves else error
        log.error("the attempt failed in the governor", exc_info=error)
        words = self.prepared.masker.text(f"{type(first).__name__}: {first}")[:500]
        self.end.broke = f"the governor failed during the attempt: {words}"

    def _processes_at_end(self) -> None:
        """What the processes came to at the end: the agent's connections the
        proxy refused, and how long the attempt ran (every part of it)."""
        end = self.end
        end.network_refused = tuple(h for h, (by, _) in self.refused.items() if by != who.PROTOCOL)
        end.network_unreachable = tuple(
            why for by, why in self.refused.values() if by == who.PROTOCOL
        )
        end.elapsed_s = time.monotonic() - self.started
        if self.continues is not None:  # the wall counts every part
            end.elapsed_s += self.continues.state.elapsed_s


async def terminate(process: Any) -> None:
    """SIGTERM the agent (its process group where it leads one) and wait a moment;
    the SIGKILL of the whole tree is the sandbox block's, on the way out."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if getattr(process, "group", False):
            os.killpg(process.pid, signal.SIGTERM)
        else:
            os.kill(process.pid, signal.SIGTERM)
    with trio.move_on_after(EXIT_GRACE):
        await process.wait()


def _leaves(error: BaseException) -> list[BaseException]:
    """The errors an exception group holds, flattened (the error itself if none)."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]
