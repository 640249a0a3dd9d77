"""One governed attempt's lifecycle: spawn the agent, drive one ACP turn, end as a value.

The steps, each owned by one nursery that nothing outlives:

  `governor.job.spec.prepare` (ceiling, env names, workspace, agent installed) and
  the sandbox's preflight -- refuse before start
  -> audit attempt-start -> spawn (inside the agent sandbox by default)
  -> initialize (protocol 1, fs + terminal) -> session/new (cwd, extra dirs, the relayed MCP servers)
  -> pick the mode in which the agent asks -> session/prompt, streaming session/update
  -> end of turn, timeout or pause: session/cancel, pending asks answered cancelled,
     grace, close stdin, SIGTERM, SIGKILL of the agent's whole tree
  -> workspace diff (unasked changes) -> `Ending` -> `judge` -> audit attempt-end.

Rules of this file: the lifecycle only *records* what happened, in the attempt's
`Ending` (a timeout, an error in the agent's words, the stop reason...); it never
decides the status. `governor.ending.how_it_ended.judge` does, from that value alone. The
gate decides requests; the turn folds updates; this file sequences them.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import shutil
import signal
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

import structlog
import trio
from pydantic import ValidationError

from governor import tamper as tamper_rules
from governor.acp.connection import Connection, ConnectionClosed, RemoteError, RequestTimeout
from governor.acp.jsonrpc import AUTH_REQUIRED, Malformed, short_error
from governor.acp.models import schema
from governor.agents import npm_installs as installs
from governor.attempt import command_agent as plain
from governor.attempt import paused, roots_size
from governor.attempt.budget import Budget
from governor.attempt.session_setup import SessionSetup, login_line
from governor.attempt.start_end_records import end_fields, start_fields
from governor.attempt.turn import Turn
from governor.audit import effects
from governor.audit.log import AuditLog, AuditUnavailable
from governor.boundary.folders import Opening
from governor.checks import canaries, held_out, test_results
from governor.checks import check_runs as checks
from governor.confine import egress as network
from governor.confine import frozen, harness, model_api
from governor.confine import sandboxes as confine
from governor.confine.workspace import Change, Snapshot, diff, snapshot
from governor.ending import home_changes as homes
from governor.ending.attribution import Evidence, change_record, explain
from governor.ending.how_it_ended import CommandResult, Ending, judge
from governor.ending.outcome import Outcome
from governor.ending.steering_files import callouts
from governor.gate import elicitation
from governor.gate.gatekeeper import Gate
from governor.gate.model_calls import ModelCalls, strength
from governor.gate.ruling import REFUSED
from governor.job.spec import AttemptSpec, PlainProgram, Prepared, RefusedBeforeStart, prepare
from governor.mcp import relay as mcp
from governor.policies import by as who
from governor.policies.canonical import digest
from governor.policies.limits import render
from governor.policies.policy import Policy
from governor.sandbox.host import budget as sandbox_budget
from governor.sandbox.host import processes
from governor.sandbox.host.limits import blame
from governor.sandbox.net.credentials import Credentials
from governor.sandbox.net.proxy import EgressProxy, open_egress
from governor.sandbox.run.execution import ExitStatus
from governor.tamper import baseline as tamper

log = structlog.get_logger("governor.attempt.lifecycle")

PROTOCOL_VERSION: Final = 1
INIT_TIMEOUT: Final = 120.0
SESSION_TIMEOUT: Final = 120.0
CANCEL_GRACE: Final = 5.0
EXIT_GRACE: Final = 2.0

RULES_FOR_THE_AGENT: Final = """

# Rules (acp-governor checks them)
- Change only what the task needs. Do not edit anything under `.git`, agent or editor configuration, or the policy files: those writes are refused.
- Run commands through the client's terminal where you can: the governor runs them in its sandbox. Ask before you act.
- If the task cannot be done as written, stop and make your final message start with `BLOCKED:` and the reason.
"""

GOVERNOR_TOOLS_RULE: Final = (
    "- Use the tools of the MCP server `governor` (`run` for commands, `read` and `write` for files) "
    "where you can: the governor decides, sandboxes and records each call, and a refused call says why. "
    "If the task cannot be done as written, call its `blocked` tool with the reason.\n"
)
"""The line ``--append-rules`` adds when the policy offers the governor's own tools."""


def rules_for_the_agent(policy: Policy) -> str:
    """What ``--append-rules`` appends to the prompt under ``policy``."""
    return RULES_FOR_THE_AGENT + (GOVERNOR_TOOLS_RULE if policy.mcp.governor_tools else "")


async def run_attempt(
    spec: AttemptSpec | Prepared,
    *,
    stop: trio.Event | None = None,
    continues: paused.Continuation | None = None,
) -> Outcome:
    """Run one governed attempt under trio. Raises `RefusedBeforeStart` when a check
    fails before anything starts (an audit log that cannot be written included);
    every other ending is an `Outcome`.

    Setting `stop` ends the attempt early the way a timeout does -- the turn is
    cancelled, the agent shut down, the outcome ``failed`` and the log complete;
    `governor run` sets it on SIGINT and SIGTERM. A spec `prepare` passed already
    (`governor run` prepares first, to report its own problems with the spec's)
    is not checked twice. With ``continues``, the attempt is a paused one going
    on (`governor.attempt.paused`): its id, its chain and its tally go on."""
    prepared = spec if isinstance(spec, Prepared) else prepare(spec)
    try:
        await confine.check(prepared.policy)
    except confine.SandboxUnavailable as e:
        raise RefusedBeforeStart([str(e)]) from None
    try:
        attempt = Attempt(prepared, stop, continues)
    except AuditUnavailable as e:
        raise RefusedBeforeStart([f"{e}; nothing was started"]) from None
    # Operational logs carry the attempt; the session joins once the agent opens
    # one (bound in this same task, so unbound here afterwards: ... is "unset").
    ids = {"attempt": attempt.id, "agent": prepared.executor.id, "session": ...}
    with structlog.contextvars.bound_contextvars(**ids):
        return await attempt.run()


def run(spec: AttemptSpec) -> Outcome:
    """`run_attempt` from synchronous code."""
    return trio.run(run_attempt, spec)


class Attempt:
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
        self.model_calls = ModelCalls(self.audit, self.budget.observed, self.budget.unread)
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

    async def run(self) -> Outcome:
        """The whole attempt, from its start record to its end record, with the
        held-out tests out of the roots from before its start to its checks
        (`governor.checks.held_out`), and back whatever ends it."""
        policy = self.prepared.policy
        try:  # before anything of the agent runs: no program it may leave runs on the host later
            places = confine.host_places(policy, self.prepared.executor.preset, self.prepared.env)
            await trio.to_thread.run_sync(
                processes.remember_written, (*places.roots, *places.homes)
            )
        except OSError as e:
            self.audit.close()
            raise RefusedBeforeStart([
                f"{e.filename}: the folders this attempt may write cannot be kept in the "
                f"state folder ({e.strerror}); nothing was started"
            ]) from None
        try:
            held = await trio.to_thread.run_sync(held_out.hide, policy, self.id)
        except (frozen.FrozenTooLarge, held_out.HoldOutFailed) as e:
            self.audit.close()
            raise RefusedBeforeStart([f"{e}; nothing was started"]) from None
        try:
            with sandbox_budget.attempt_budget(policy.limits) as self.sandboxes:
                return await self._run(held)
        finally:
            if held is not None:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(held_out.put_back, held, policy)

    async def _run(self, held: held_out.HeldOut | None) -> Outcome:
        p = self.prepared
        policy = p.policy
        try:
            frozen_at_start = await trio.to_thread.run_sync(frozen.recorded, policy)
            await trio.to_thread.run_sync(harness.pins, policy)  # past its bounds: not started
            acceptance = await trio.to_thread.run_sync(
                test_results.acceptance_of, policy, held.tests if held is not None else ()
            )
            unjudged = await trio.to_thread.run_sync(
                test_results.unjudged,
                policy,
                acceptance,
                held.at_start.files if held is not None else 0,
            )
        except frozen.FrozenTooLarge as e:
            self.audit.close()
            raise RefusedBeforeStart([f"{e}; nothing was started"]) from None
        unjudgeable = [
            f"check {k} ({command}): {why}: the canaries every check carries cannot judge it "
            "(docs/loops.md); run every test of the acceptance files, without stopping at a failure"
            for k, command in enumerate(policy.checks, 1)
            if acceptance.tests and (why := canaries.cannot_judge(command)) is not None
        ]
        if unjudgeable:
            self.audit.close()
            raise RefusedBeforeStart([*unjudgeable, "nothing was started"])
        hidden = None if held is None else {**held.at_start.to_json(), "folder": str(held.folder)}
        try:
            if self.continues is None:
                start = self.audit.record(
                    "attempt-start", **start_fields(p, frozen_at_start), held_out=hidden
                )
            else:  # the same chain goes on: a part, not a new attempt
                start = self.audit.record(
                    "attempt-resume",
                    **start_fields(p, frozen_at_start),
                    held_out=hidden,
                    approval=self.continues.approval.get("seq"),
                    part=self.continues.state.parts + 1,
                )
            await self.audit.durable(start)
            self.emit("attempt", {"id": self.id, "agent": self.name, "log": str(p.log_path)})
        except AuditUnavailable as e:
            self.audit.close()
            raise RefusedBeforeStart([f"{e}; nothing was started"]) from None
        with Opening() as opened:  # the baseline reads what the walk opened
            before = await trio.to_thread.run_sync(
                functools.partial(snapshot, policy.roots, opening=opened)
            )
            kept = await trio.to_thread.run_sync(tamper.keep, before.files, policy.roots)
        # a part of a paused attempt is judged against the attempt's start, not its own
        carried = self.continues.baseline if self.continues is not None else None
        self.baseline = carried or (before, kept)
        home = homes.home_roots(p.executor.preset, p.env)
        home_before = await trio.to_thread.run_sync(snapshot, home, homes.HOME_MAX_FILES)
        # what the home folders hold now is the person's; what they gain, the attempt's
        home_held = (
            (await trio.to_thread.run_sync(roots_size.measure, home)).total
            if home and policy.limits.workspace is not None
            else 0
        )
        if home:
            self._disk_watched = "the writable roots and what the agent added to its home folders"
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.audit.run_batch_sync)
                if self.stop is not None:
                    nursery.start_soon(self._watch_stop, self.stop)
                nursery.start_soon(sandbox_budget.watch, self.sandboxes, self._stop_at)
                if policy.limits.workspace is not None:
                    nursery.start_soon(
                        roots_size.watch,
                        policy.roots,
                        policy.limits.workspace,
                        self._over_workspace,
                        before.closed,
                        home,
                        home_held,
                    )
                terminals = self.terminals = confine.GovernedTerminals(
                    nursery, policy, p.env, proxy=lambda: self.proxy
                )
                self.gate = Gate(
                    policy,
                    self.audit,
                    p.approver,
                    terminals=terminals,
                    on_event=self.listener,
                    end=self.end,
                    on_new_tool_call=self.budget.tool_call,
                )
                if self.continues is not None:
                    self.gate.number_after(self.continues.state.requests)
                if not isinstance(p.executor, PlainProgram):
                    keys = self.keys = model_api.held_credentials(
                        p.executor.preset, p.env, sandboxed=p.sandboxed_agent
                    )
                    self.model_api = model_api.open_model_api(
                        keys, self.id, self.model_calls.record, self.budget.refusal,
                        metered=self.budget.metered,
                    )
                interception = None if self.model_api is None else self.model_api.interception
                api = network.model_api_hosts(p.executor.preset, p.env)
                try:
                    async with (
                        open_egress(
                            network.judge(self.gate, self.refused, api), None, interception
                        ) as self.proxy,
                        mcp.open_relay(
                            self.gate, policy, p.spec.environ, lambda: self.proxy, p.relay_token or None
                        ) as self.relay,
                    ):
                        if isinstance(p.executor, PlainProgram):
                            await self._drive_command()
                        else:
                            await self._drive()
                finally:
                    await terminals.close()
                    if self.model_api is not None:
                        shutil.rmtree(self.model_api.trust, ignore_errors=True)
                nursery.cancel_scope.cancel()
        except Exception as e:  # an ExceptionGroup of the tasks' errors, never a Cancelled
            self._broke(e)
        self._sandboxes_spent()
        with Opening() as opened:  # the tamper audit reads what the walk opened
            after = await trio.to_thread.run_sync(
                functools.partial(
                    snapshot,
                    policy.roots,
                    before=before,
                    also_hash=self.end.carried.written,
                    opening=opened,
                )
            )
            self._unasked_changes(before, after)  # this part's: earlier parts' are tallied
            await self._tamper_audit(self.baseline[1], self.baseline[0], after)
        # The frozen files' digest before the held-out ones come back: a path both
        # frozen and held out counts as held out, at both ends alike.
        frozen_at_end, said = await trio.to_thread.run_sync(frozen.at_end, policy, frozen_at_start)
        self.turn.notices.extend(said)
        if frozen_at_start is not None:
            self.end.frozen = {"start": frozen_at_start, "end": frozen_at_end}
        if held is not None:  # the agent and all it started are gone: the checks' turn
            await trio.to_thread.run_sync(held_out.put_back, held, policy)
            self.turn.notices.extend(held_out.notices(held))
            self.end.held_out = held.to_json()
        home_after = await trio.to_thread.run_sync(
            functools.partial(snapshot, home, homes.HOME_MAX_FILES, before=home_before)
        )
        self.end.home_changes = tuple(diff(home_before, home_after))
        self.end.home_complete = home_before.complete and home_after.complete
        if policy.checks and not self.end.interrupted:  # a person who stops wants it stopped
            report = functools.partial(checks.report, self.audit, self.emit)
            self.sandboxes.settle()
            async with trio.open_nursery() as watching:  # the checks' sandboxes: the same budget
                watching.start_soon(sandbox_budget.watch, self.sandboxes, self._stop_at)
                self.end.checks = await checks.run_checks(
                    policy,
                    environ=p.spec.environ,
                    masker=p.masker,
                    on_check=report,
                    acceptance=acceptance,
                )
                watching.cancel_scope.cancel()
            self._sandboxes_spent()
            self.turn.notices.extend(unjudged)
        self.end.harness = harness.described(policy)
        outcome = judge(self._ended())
        outcome.trace_id = p.spec.trace_id
        state = self._paused_state(outcome)
        end: dict[str, Any] = {}
        with contextlib.suppress(AuditUnavailable):
            end = self.audit.record(
                "attempt-end",
                **end_fields(outcome, frozen_at_end, p.masker),
                held_out=outcome.held_out,
            )
        self.audit.close()
        head = self.audit.head
        if head is not None:
            outcome.log_head, outcome.log_records = head
            if "signature" in end and p.signer is not None:
                outcome.log_key = p.signer.key_id
        self._keep_or_discard(state, head)
        return outcome

    def _paused_state(self, outcome: Outcome) -> paused.PausedState | None:
        """What going on needs, when the attempt paused on an ask and its job can be
        written down (`governor.attempt.paused`); the head is set once the end
        record is written."""
        p, gate = self.prepared, self.gate
        if outcome.status != "needs_approval" or gate is None or gate.paused_on is None:
            return None
        if p.log_path is None or (job := paused.job_of(p.spec)) is None:
            return None
        earlier = self.continues.state if self.continues is not None else None
        waiting = _waiting_call(self.end.pending)
        return paused.PausedState(
            attempt=self.id,
            log=str(p.log_path.resolve()),
            head="",
            records=0,
            requests=gate.requests,
            job=job,
            policy_digest=digest(p.policy),
            ceiling_digest=digest(p.ceiling),
            pending={**(self.end.pending or {}), **gate.paused_on},
            session={"id": self.turn.session_id, **self.session_caps},
            elapsed_s=self.end.elapsed_s,
            parts=earlier.parts + 1 if earlier is not None else 1,
            tool_calls=self.budget.tool_calls - (waiting is not None),
            tool_call_ids=[i for i in self.budget.counted_ids if i != waiting],
            tokens=self.budget.total_tokens,
            cost_usd=self.budget.cost_usd,
            wire_tokens=self.budget.total_wire_tokens,
        )

    def _keep_or_discard(self, state: paused.PausedState | None, head: tuple[str, int] | None) -> None:
        """Write the paused state (its head: the end record just written), or, for a
        resumed attempt that did not pause again, discard the spent one."""
        if state is not None and head is not None:
            state.head, state.records = head
            try:
                state.save()
                if self.baseline is not None:
                    state.save_baseline(self.baseline)
            except OSError as e:
                log.warning("the paused state cannot be written", error=str(e))
        elif self.continues is not None:
            self.continues.state.discard()

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

    def _ended(self) -> Ending:
        """The attempt's `Ending`, completed with what the turn and the log hold at
        its end (the gate wrote its own facts into it as they happened)."""
        end, turn, audit = self.end, self.turn, self.audit
        end.final_message = turn.final_message
        end.network_refused = tuple(h for h, (by, _) in self.refused.items() if by != who.PROTOCOL)
        end.network_unreachable = tuple(
            why for by, why in self.refused.values() if by == who.PROTOCOL
        )
        end.tally = audit.tallier.tally()
        end.unasked_paths = tuple(
            sorted(
                {
                    path
                    for subject in audit.unasked
                    for path in (subject.get("paths") or [subject.get("path")])
                    if path
                }
            )
        )
        end.mode = turn.mode
        end.title = turn.title
        end.config = {o.id: o.current_value for o in turn.config_options}
        end.plan = turn.plan
        plain = isinstance(self.prepared.executor, PlainProgram)  # it reports nothing
        end.usage = turn.usage if plain else self.budget.usage(turn.usage)
        if not plain:
            observed = self.model_calls.usage()
            end.usage = {
                **self.budget.usage(turn.usage),
                "observed": observed,
                "strength": strength(observed, self.budget.reported),
            }
        p = self.prepared
        keys_said = [] if plain else model_api.notices(
            p.executor.preset, p.env, self.keys, sandboxed=p.sandboxed_agent
        )  # fmt: skip
        end.notices = (
            *turn.notices,
            *([] if plain else self.budget.notices()),
            *keys_said,
            *mcp.said(self.relay),
        )
        end.bad_updates = turn.bad_updates
        end.decisions = audit.seq - 1  # every record but the attempt-start
        end.elapsed_s = time.monotonic() - self.started
        if self.continues is not None:  # the wall counts every part
            end.elapsed_s += self.continues.state.elapsed_s
        return end

    def _fetching(self, package: str) -> None:
        """A first npx start: its package is fetched before anything else shows
        (a person saw nothing for a minute)."""
        self.emit("fetching", {"agent": self.name, "package": package, "via": "npx"})

    # -- an ACP agent ----------------------------------------------------------------

    async def _drive(self) -> None:
        p = self.prepared
        gate = self.gate
        assert gate is not None
        try:
            if p.executor.via_npx and p.executor.preset is not None:
                await installs.fetch_for_npx(
                    installs.spec(p.executor.preset), p.executor.argv[0], p.env,
                    confine.host_places(p.policy, p.executor.preset, p.env), self._fetching,
                )  # fmt: skip
            profile = confine.agent_profile(
                p.executor.argv,
                p.policy,
                p.executor.preset,
                model_api.agent_env(p.env, self.keys, self.model_api),
                sandbox=p.spec.sandbox_agent,
                via_npx=p.executor.via_npx,
            )
            if self.model_api is not None:  # the trust bundle, read-only
                profile = replace(profile, own=(*profile.own, self.model_api.trust))
            profile = mcp.exposed(profile, self.relay)
            async with confine.spawn_agent(profile, p.executor.argv, self.proxy) as process:
                self.emit(
                    "spawned",
                    {
                        "agent": self.name,
                        "pid": process.pid,
                        "argv": p.shown_argv,
                    },
                )
                assert process.stdin is not None and process.stdout is not None
                conn = Connection(
                    process.stdin,
                    process.stdout,
                    process.stderr,
                    max_line_bytes=p.spec.max_line_bytes,
                    on_rejected=self._rejected_at_wire,
                )
                try:
                    async with trio.open_nursery() as inner:
                        await inner.start(conn.serve, gate.routes(), self._on_notification)
                        with self._deadline() as deadline:
                            await self._session(conn, inner)
                        if deadline.cancelled_caught:
                            self._timed_out_or_interrupted()
                            await self._cancel_turn(conn)
                            await self._await_turn(CANCEL_GRACE)
                        gate.cancel()  # the turn is over: later requests are refused, never acted on
                        await self._shutdown(process, conn)
                        inner.cancel_scope.cancel()
                finally:
                    self.end.gave_up = conn.gave_up
                    self.end.stderr_tail = tuple(conn.stderr_tail)
            self._blame_limit(process.returncode, "\n".join(self.end.stderr_tail))
            if self.end.error is not None:
                self.end.unseen_folders = await trio.to_thread.run_sync(
                    confine.unseen_folders, profile
                )
        except (OSError, confine.SandboxUnavailable, installs.InstallError) as e:
            self.end.error = (
                f"{self.name} could not be started: {getattr(e, 'strerror', None) or e}"
            )

    async def _session(self, conn: Connection, nursery: trio.Nursery) -> None:
        """initialize -> session/new -> the asking mode -> the prompt, whose turn runs
        in `nursery` (the connection's) while this waits for it to end."""
        p = self.prepared
        gate = self.gate
        assert gate is not None
        try:
            init = await conn.request(
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "clientCapabilities": self._capabilities(),
                    "clientInfo": {
                        "name": "acp-governor",
                        "title": "acp-governor",
                        "version": _version(),
                    },
                },
                timeout=INIT_TIMEOUT,
            )
            init_model = schema.InitializeResponse.model_validate(init)
        except (RemoteError, ConnectionClosed, RequestTimeout, ValidationError) as e:
            self.end.error = f"{self.name} did not initialize: {short_error(e)}"
            return
        if init_model.agent_info and init_model.agent_info.name:
            self.name = init_model.agent_info.title or init_model.agent_info.name
        if init_model.protocol_version != PROTOCOL_VERSION:
            self.end.error = (
                f"{self.name} speaks ACP protocol version {init_model.protocol_version}; "
                f"the governor speaks {PROTOCOL_VERSION}"
            )
            return
        self.auth_methods = list(init_model.auth_methods or [])
        caps = init_model.agent_capabilities
        new_params: dict[str, Any] = {"cwd": p.policy.workspace, "mcpServers": mcp.offered(self.relay)}
        extra = list(p.policy.roots[1:])
        if extra:
            supported = bool(
                caps
                and caps.session_capabilities
                and getattr(caps.session_capabilities, "additional_directories", None) is not None
            )
            if supported:
                new_params["additionalDirectories"] = extra
            else:
                self.turn.notices.append(
                    f"{self.name} does not take extra directories; they are governed roots but the agent was not told of them"
                )
        sc = caps.session_capabilities if caps else None
        self.session_caps = {
            "load": bool(caps and caps.load_session),
            "resume": bool(sc and getattr(sc, "resume", None) is not None),
        }
        prompt = p.spec.prompt + (rules_for_the_agent(p.policy) if p.spec.append_rules else "")
        try:
            went_on = await self._go_on(conn, new_params) if self.continues is not None else None
            if went_on is not None:
                raw, session_id, prompt = went_on
                raw = {**raw, "sessionId": session_id}
            else:
                raw = await conn.request("session/new", new_params, timeout=SESSION_TIMEOUT)
            session = schema.NewSessionResponse.model_validate(raw)
        except RemoteError as e:
            if e.code == AUTH_REQUIRED:
                self._needs_sign_in()
            else:
                self.end.error = f"{self.name} could not start a session: {short_error(e)}"
            return
        except (ConnectionClosed, RequestTimeout, ValidationError) as e:
            self.end.error = f"{self.name} could not start a session: {short_error(e)}"
            return
        self.turn.session_id = gate.session_id = session.session_id
        structlog.contextvars.bind_contextvars(session=session.session_id)
        setup = await SessionSetup(conn, self.prepared, self.name, self.audit).run(
            session, raw.get("models")
        )
        self.turn.notices.extend(setup.notices)
        if setup.error is not None:
            self.end.error = setup.error
            return
        self.end.model, self.end.alone = setup.model, setup.alone
        self.turn.settled(setup.mode)
        self.turn.config_options = list(setup.config_options)
        self.emit("prompt", {"session": session.session_id})
        # The prompt runs in the connection's nursery, outside the deadline: after a
        # timeout or a pause the agent still gets to answer it `cancelled` (and to
        # receive our `cancelled` answers) before its stdin is closed.
        nursery.start_soon(self._prompt, conn, session.session_id, prompt)
        nursery.start_soon(self._watch_pause, conn)
        await self.turn_over.wait()

    async def _go_on(
        self, conn: Connection, params: dict[str, Any]
    ) -> tuple[dict[str, Any], str, str] | None:
        """A resumed attempt's session: the agent's own, resumed (``session/resume``,
        no replay) or loaded (``session/load``: its replayed history neither folded
        nor tallied again), and the prompt that tells it the person's decision;
        None when it can do neither (a new session and the task again, said in
        the outcome's notices). An agent that advertised one and then failed it
        is said so, and starts afresh too."""
        assert self.continues is not None
        state = self.continues.state
        before = state.session
        session_id = before.get("id")
        decision = self.continues.approval.get("answer")
        pending = state.pending
        told = (
            f"A person {'refused' if decision == 'deny' else 'approved'} your request "
            f"({pending.get('kind', 'request')}: {pending.get('shown', '')}). "
            + ("Go on with the task without it." if decision == "deny" else "Ask it again and go on with the task.")
        )
        part = state.parts + 1
        sid = session_id if isinstance(session_id, str) else ""
        ways = [w for w in ("resume", "load") if self.session_caps.get(w) and sid]
        for way in ways:
            method = f"session/{way}"
            self.replaying = way == "load"
            try:
                raw = await conn.request(method, {**params, "sessionId": sid}, timeout=SESSION_TIMEOUT)
            except (RemoteError, ConnectionClosed, RequestTimeout) as e:
                self.turn.notices.append(f"{self.name} could not {way} its session: {short_error(e)}")
                continue
            finally:
                self.replaying = False
            self.turn.notices.append(
                f"part {part} of the attempt: {self.name}'s session {way.rstrip('e')}ed ({method}), told the "
                f"person's decision on request {pending.get('request')}"
            )
            return (raw if isinstance(raw, dict) else {}), sid, told
        self.turn.notices.append(
            f"part {part} of the attempt: {self.name} can neither resume nor load its session: "
            f"it started afresh at the task, with the person's decision on request "
            f"{pending.get('request')} as a grant"
        )
        return None

    def _capabilities(self) -> dict[str, Any]:
        """What the governor offers the agent: fs and terminals (all governed),
        boolean config options, and forms only when a person is there to fill them."""
        caps: dict[str, Any] = {
            "fs": {"readTextFile": True, "writeTextFile": True},
            "terminal": True,
            "session": {"configOptions": {"boolean": {}}},
        }
        if elicitation.person_of(self.prepared.approver) is not None:
            caps["elicitation"] = {"form": {}}
        return caps

    async def _prompt(self, conn: Connection, session_id: str, prompt: str) -> None:
        try:
            result = await conn.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": prompt}]},
                then_refuse=(REFUSED, "Refused by the governor: the turn is over"),
            )
            response = schema.PromptResponse.model_validate(result)
            self.end.stop_reason = response.stop_reason
            if response.usage is not None:
                self.turn.add_usage(response.usage)
        except RemoteError as e:
            if e.code == AUTH_REQUIRED:
                self._needs_sign_in()
            else:
                self.end.error = f"{self.name} answered the prompt with an error: {short_error(e)}"
        except (ConnectionClosed, ValidationError) as e:
            self.end.error = f"{self.name} ended without an answer: {short_error(e)}"
        finally:
            self.turn_over.set()

    def _needs_sign_in(self) -> None:
        self.end.sign_in = login_line(
            self.auth_methods, self.prepared.executor.preset, self.prepared.executor.argv[0]
        )
        self.end.error = f"{self.name} needs signing in: {self.end.sign_in}"

    def _on_notification(self, method: str, params: Any) -> None:
        if method == "session/update" and not self.replaying:
            self.turn.feed(params)

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

    # -- the end of a turn ------------------------------------------------------------

    def _deadline(self) -> trio.CancelScope:
        """The scope of the turn: it ends at the timeout, or when `stop` is set."""
        spent = self.continues.state.elapsed_s if self.continues is not None else 0.0
        self.deadline = trio.move_on_after(max(self.prepared.wall - spent, 0.0))  # the wall spans every part
        if (self.stop is not None and self.stop.is_set()) or self.end.limit is not None:
            self.deadline.cancel()
        return self.deadline

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

    async def _watch_pause(self, conn: Connection) -> None:
        gate = self.gate
        assert gate is not None
        await gate.pause_requested.wait()
        await self._cancel_turn(conn)
        await self._await_turn(CANCEL_GRACE)

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
            await _terminate(process)

    # -- a plain command ---------------------------------------------------------------

    async def _drive_command(self) -> None:
        """A plain program: prompt on stdin, stdout kept (newest bytes), stderr tail."""
        p = self.prepared
        stdout = bytearray()
        stderr = bytearray()
        try:
            if p.executor.via_npx and p.executor.preset is not None:
                await installs.fetch_for_npx(
                    installs.spec(p.executor.preset), p.executor.argv[0], p.env,
                    confine.host_places(p.policy, p.executor.preset, p.env), self._fetching,
                )  # fmt: skip
            profile = confine.agent_profile(
                p.executor.argv, p.policy, None, p.env, sandbox=p.spec.sandbox_agent,
                via_npx=p.executor.via_npx,
            )  # fmt: skip
            began = time.time_ns()
            try:
                async with confine.spawn_agent(profile, p.executor.argv, self.proxy) as process:
                    self.emit("spawned", {"agent": self.name, "pid": process.pid})
                    await self._feed_command(process, stdout, stderr)
            finally:  # its sandbox is gone: nothing of it writes after this
                self.program_ran = (began, time.time_ns())
        except (OSError, confine.SandboxUnavailable, installs.InstallError) as e:
            self.end.error = (
                f"{self.name} could not be started: {getattr(e, 'strerror', None) or e}"
            )
            return
        self._blame_limit(process.returncode, stderr.decode("utf-8", errors="replace"))
        self.end.command = CommandResult(
            process.returncode,
            stdout.decode("utf-8", errors="replace"),
            stderr.decode("utf-8", errors="replace"),
        )

    async def _feed_command(self, process: Any, stdout: bytearray, stderr: bytearray) -> None:
        with self._deadline() as deadline:
            await plain.converse(process, self.prepared.spec.prompt.encode(), stdout, stderr)
        if deadline.cancelled_caught:
            self._timed_out_or_interrupted()
            await _terminate(process)

    # -- what changed without asking ---------------------------------------------------

    async def _tamper_audit(self, kept: tamper.Baseline, before: Snapshot, after: Snapshot) -> None:
        """The tamper audit of the diff (`governor.tamper`), into the `Ending`."""
        diffed = diff(before, after)
        changed = [c.path for c in diffed]
        self.end.files_changed = tuple(changed)
        found = await trio.to_thread.run_sync(tamper.audit, kept, after.files, changed)
        set_changed = harness.findings(
            self.prepared.policy,
            [(c.path, c.how) for c in diffed],
            itertools.chain(before.files, after.files),
        )
        findings = tuple(found.findings)
        if not self.prepared.policy.checks:
            # New code at import in a source module matters to a check's verdict
            # only: with no check, a script's top-level code (the demo's
            # hello.py) is the agent's work, not a weakened test.
            roots = self.prepared.policy.roots
            findings = tuple(
                f for f in findings
                if f.rule != "import-code-added" or tamper_rules.looks_like_test(_under(f.path, roots))
            )
        self.end.findings = findings + tuple(set_changed)
        self.end.findings_more = found.more
        self.end.audit_skipped = found.skipped

    def _change_diff(self, change: Change) -> dict[str, str]:
        """The diff of a change the agent made itself, from the attempt's start
        (`tamper.change_texts`: source and test files the baseline kept),
        masked and bounded as a governed write's is; none for a later part of a
        paused attempt, whose baseline is the attempt's start, not the part's."""
        if self.baseline is None or self.continues is not None:
            return {}
        texts = tamper.change_texts(self.baseline[1], change.path, change.how)
        if texts is None:
            return {}
        return {"diff": effects.unified(change.path, *texts, self.audit.masker)}

    def _unasked_changes(self, before: Snapshot, after: Snapshot) -> None:
        """Record each change in the roots that no governed action explains
        (``unasked``), and each that only an allowed permission explains (the agent
        did it itself: ``changed``, with what explains it); `governor.ending.attribution`
        holds the rule."""
        changes = diff(before, after)
        self.turn.notices.extend(callouts(changes, self.prepared.policy.roots))
        if self.gate is None:
            return  # nothing was governed: nothing ran
        carried = self.end.carried
        covered = {p for subject in self.audit.unasked for p in subject.get("paths", [])}
        now = time.time_ns()
        evidence = Evidence(
            written=carried.written,
            current=after,
            commands=[(a, b or now) for a, b in confine.command_windows(self.terminals)],
            allowed=carried.allowances,
            ended_ns=now,
            program=self.program_ran,
        )
        masked = self.audit.masker.text
        for change in changes:
            if change.path in covered or masked(change.path) in covered:
                continue  # (the record holds the path as masked: a secret in it)
            cause = explain(change, evidence)
            if cause is not None and cause.tool_call is None and cause.rule != "program":
                continue  # a governed write or command: its own record says so
            fields = change_record(change, cause)
            fields.update(self._change_diff(change))
            try:
                self.audit.record(fields.pop("kind"), session=self.turn.session_id, **fields)
            except AuditUnavailable:
                break
        if after.left_unknown:
            self.turn.notices.append(
                "the workspace has more files than the governor walks: every file there at "
                "the start was checked, but new files past the walk's bound (50,000 outside a "
                "git repository, 1,000,000 that git tracks or would track) were not looked for"
            )
        elif after.left_unseen():
            self.turn.notices.append(
                "the workspace has more files git ignores than the governor walks (50,000): "
                "every file git tracks or would track was checked, but files were made or "
                "removed during the attempt in ignored folders it did not walk: "
                + ", ".join(after.changed_unwalked()[:5])
            )


def _waiting_call(pending: Mapping[str, Any] | None) -> str | None:
    """The id of the tool call whose permission the attempt paused on (None for a
    request of no tool call: a write, a command, a connection). That call is
    counted by the part that decides it, where the agent asks it again, under
    this id or a new one: counted in both, an attempt paused on its last allowed
    call could never go on."""
    if pending is None or pending.get("kind") != "permission":
        return None
    subject = pending.get("subject")
    call = subject.get("tool_call") if isinstance(subject, Mapping) else None
    return call if isinstance(call, str) and call else None


def _leaves(error: BaseException) -> list[BaseException]:
    """The errors an exception group holds, flattened (the error itself if none)."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _version() -> str:
    from governor.version import __version__

    return __version__


async def _terminate(process: Any) -> None:
    """SIGTERM the agent (its process group where it leads one) and wait a moment;
    the SIGKILL of the whole tree is the sandbox block's, on the way out."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if getattr(process, "group", False):
            os.killpg(process.pid, signal.SIGTERM)
        else:
            os.kill(process.pid, signal.SIGTERM)
    with trio.move_on_after(EXIT_GRACE):
        await process.wait()


def _under(path: str, roots: Sequence[str]) -> str:
    """``path`` relative to the root that holds it (as the tamper audit names files)."""
    for root in roots:
        if path.startswith(root.rstrip("/") + "/"):
            return path[len(root.rstrip("/")) + 1 :]
    return path
