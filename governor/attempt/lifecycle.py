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

The steps, each in a module of this room that `Attempt` inherits from, none
deciding either: `under_way` (the attempt's state, its deadline, its limits,
the agent's shutdown), `agent_session` (an ACP agent: initialize, session,
prompt, the end of its turn), `program_run` (a plain program), `roots_changes`
(the tamper audit of the diff, the changes nothing governed explains).
"""

from __future__ import annotations

import contextlib
import functools
import shutil
from collections.abc import Mapping
from typing import Any

import structlog
import trio

from governor.attempt import paused, roots_size
from governor.attempt.agent_session import AgentSession
from governor.attempt.program_run import ProgramRun
from governor.attempt.roots_changes import RootsChanges
from governor.attempt.start_end_records import end_fields, start_fields
from governor.audit.log import AuditUnavailable
from governor.boundary.folders import Opening
from governor.checks import canaries, held_out, test_results
from governor.checks import check_runs as checks
from governor.confine import egress as network
from governor.confine import frozen, harness, model_api
from governor.confine import sandboxes as confine
from governor.confine.workspace import snapshot
from governor.ending import home_changes as homes
from governor.ending.how_it_ended import Ending, judge
from governor.ending.outcome import Outcome
from governor.gate.gatekeeper import Gate
from governor.job.spec import AttemptSpec, PlainProgram, Prepared, RefusedBeforeStart, prepare
from governor.mcp import relay as mcp
from governor.policies.canonical import digest
from governor.sandbox.host import budget as sandbox_budget
from governor.sandbox.host import processes
from governor.sandbox.net.proxy import open_egress
from governor.tamper import baseline as tamper

log = structlog.get_logger("governor.attempt.lifecycle")


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


class Attempt(AgentSession, ProgramRun, RootsChanges):
    """One attempt under way, its steps in order: the state and the end of a turn
    (`UnderWay`), an ACP agent's steps (`AgentSession`) or a plain program's
    (`ProgramRun`), what changed in the roots (`RootsChanges`), and here the
    sequence and the end: its `Ending` judged once into the `Outcome`."""

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
                        self.sandboxes,
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
            self._frozen_seen(frozen_at_start, frozen_at_end)
        if held is not None:  # the agent and all it started are gone: the checks' turn
            await trio.to_thread.run_sync(held_out.put_back, held, policy)
            self.turn.notices.extend(held_out.notices(held))
            self._held_out_back(held)
        home_after = await trio.to_thread.run_sync(
            functools.partial(snapshot, home, homes.HOME_MAX_FILES, before=home_before)
        )
        self._home_changed(home_before, home_after)
        if policy.checks and not self.end.interrupted:  # a person who stops wants it stopped
            report = functools.partial(checks.report, self.audit, self.emit)
            self.sandboxes.settle()
            async with trio.open_nursery() as watching:  # the checks' sandboxes: the same budget
                watching.start_soon(sandbox_budget.watch, self.sandboxes, self._stop_at)
                self._checks_ran(
                    await checks.run_checks(
                        policy,
                        environ=p.spec.environ,
                        masker=p.masker,
                        on_check=report,
                        acceptance=acceptance,
                    )
                )
                watching.cancel_scope.cancel()
            self._sandboxes_spent()
            self.turn.notices.extend(unjudged)
        self._harness_left(harness.described(policy))
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

    def _ended(self) -> Ending:
        """The attempt's `Ending` at its end, each part completed by its one writer
        (`governor.ending.how_it_ended.PARTS`: the gate wrote its own as it went);
        the log's part is written here."""
        self._processes_at_end()
        self._turn_said()
        end, audit = self.end, self.audit
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
        end.decisions = audit.seq - 1  # every record but the attempt-start
        return end


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
