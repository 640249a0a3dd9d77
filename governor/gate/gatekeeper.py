"""The gate: every request the agent makes is decided here, recorded, then answered.

Rules of this file (everything that turns an agent's request into a ruling):

1. The request becomes a `policies` action and `governor.policies.decide` judges it.
2. An ``ask`` goes to the approver (unless a person's grant covers it); an
   elicitation's form goes to the person who fills it.
3. The decision is written to the audit log -- handed to the OS, and fsynced
   when durability is ``always`` -- **before** the answer is returned.
4. Only then does anything happen: a refused write never touches the disk, a
   refused command never starts, a refused form is never shown.

One method owns the four steps, `Gate.govern`; each handler -- here, in
`governor.gate.file_requests` and in `governor.gate.terminal_requests` -- builds its action and
subject, calls it once, and acts on the `Ruling` it gets. A ruling that needs
neither an approver nor an fsync is made at once, and the answer goes back in
the same pass over the agent's line (no task); otherwise it comes later.
`govern`, `ruled` and `governor.gate.ruling.then` are the only places that know the two apart.

If the audit log cannot be written, nothing more is allowed: every further
request is refused (fail closed), elicitations included, and the attempt ends
``failed``.

The gate keeps no account of how the attempt went: what decides that -- it
failed closed, the ask that paused it, the methods it did not know, what it
carried out, the agent's ``blocked`` reason -- it writes into the attempt's
`Ending` as it happens, and nothing reads it back from the gate. This file is
that part's one writer (`governor.ending.how_it_ended.PARTS`): a handler or a
tool that learns such a fact calls the gate (`fail`, `blocked`).
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import structlog
import trio

from governor.acp.dispatch import Route, Routes, RpcError
from governor.acp.jsonrpc import RESOURCE_NOT_FOUND
from governor.acp.models import schema
from governor.audit.log import AuditLog, AuditUnavailable, recorded_input
from governor.confine.sandboxes import GovernedTerminals
from governor.ending.how_it_ended import Ending
from governor.gate import elicitation
from governor.gate.approver import Approvals, Approver, Settled, request_key, whole_shown
from governor.gate.file_requests import FileRequests
from governor.gate.ruling import REFUSED, Choose, Ruling, Settle, then
from governor.gate.terminal_requests import TerminalRelay
from governor.gate.tool_calls import (
    Mention,
    ToolCalls,
    ToolCallState,
    explained,
    named_paths,
    newly_completed,
    report,
)
from governor.policies import by as who
from governor.policies.actions import ToolPermission
from governor.policies.decide import Decision, decide
from governor.policies.options import CACHED_TEXT, choose_offered
from governor.policies.policy import Policy
from governor.policies.rules import Verdict

log = structlog.get_logger("governor.gate.gatekeeper")

_RESPONSES_KEPT: Final = 32
"""Permission answers kept built, one per option id (ids are the agent's to choose)."""


class Gate:
    """The single decision point for one attempt's agent-to-client requests."""

    def __init__(
        self,
        policy: Policy,
        audit: AuditLog,
        approver: Approver,
        *,
        terminals: GovernedTerminals | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        end: Ending | None = None,
        on_new_tool_call: Callable[[str], None] | None = None,
    ) -> None:
        self.policy = policy
        self.audit = audit
        self.approvals = Approvals(approver)
        self.on_event = on_event or (lambda kind, info: None)
        self._quiet = on_event is None  # nobody listens: no event to build
        self.end = end if end is not None else _own_ending(audit)
        """Where the gate writes what it learns (a gate outside an attempt -- a
        test, a bench -- keeps an `Ending` of its own)."""
        self.carried = self.end.carried
        self.session_id: str | None = None
        self.tool_calls = ToolCalls(on_new_tool_call)
        self.pause_requested = trio.Event()
        self._requests = 0
        self.paused_on: dict[str, Any] | None = None
        """The paused request's record seq and its subject as an approver is shown it."""
        self._last_written: int | None = None
        """The request of the last decision record written (an overruling writes
        its request again)."""
        self._responses: dict[str | None, schema.RequestPermissionResponse] = {}
        self._routes: Routes | None = None
        self.files = FileRequests(self)
        self.relay = None if terminals is None else TerminalRelay(self, terminals)

    @property
    def failure(self) -> str | None:
        """Why the gate failed closed (None while it has not)."""
        return self.end.failure

    # -- the handler table ----------------------------------------------------------

    def routes(self) -> Routes:
        """Method -> (params model, handler) for `governor.acp.dispatch`, built once:
        it also counts the methods the agent asked for that the governor does not
        know, into the `Ending` (the same dict: counted as they come)."""
        if self._routes is None:
            self._routes = Routes(self._table())
            self.end.unknown_requests = self._routes.unknown
        return self._routes

    def _table(self) -> dict[str, Route]:
        table = {
            "session/request_permission": Route(
                schema.RequestPermissionRequest, self.request_permission
            ),
            **self.files.routes(),
            "elicitation/create": Route(elicitation.ElicitationRequest, self.create_elicitation),
        }
        if self.relay is not None:
            table.update(self.relay.routes())
        return table

    # -- the four steps: decide -> approve -> record -> (answer) ---------------------

    def govern(
        self,
        kind: str,
        subject: dict[str, Any],
        shown: str,
        decision: Decision,
        detail: dict[str, Any],
        choose: Choose | None = None,
        *,
        settle: Settle | None = None,
        overrules: Ruling | None = None,
    ) -> Ruling | Awaitable[Ruling]:
        """The ruling on one request, recorded before it is returned.

        `decision` is the engine's; an ``ask`` goes to the approver (unless a
        person's grant covers it), or to `settle` when the request brings its
        own (an elicitation's form, for the person who fills it); `choose` picks
        the option answered by effect. The record is handed to the OS before
        the ruling is returned, and fsynced first when durability is
        ``always``. Made at once (a `Ruling`) when nothing needs waiting for,
        else later (an awaitable).

        `overrules` is a ruling this one takes back (the sandbox could not start
        what was allowed): recorded under its request, so that the log and the
        tally keep one request, in `decision`'s own words (a refusal, final: no
        approver, and the fail-closed check it causes would only reword it)."""
        if overrules is not None:
            if decision.verdict is not Verdict.DENY:
                raise ValueError("only a refusal overrules a ruling")
            request = overrules.request
            # written whole, never counted among repeated refusals: its request's
            # first record was written, and the tally must see both as one request
            self._last_written = request
            settled: Settled | None = (decision.verdict, decision.by, decision.reason)
        else:
            request = self._next_request()
            settled = self._settle_now(kind, subject, shown, decision, detail)
        if settled is not None and self.audit.durability != "always":
            return self._rule(kind, request, subject, decision, settled, choose, shown, detail)[0]
        return self._govern_later(
            kind, request, subject, shown, decision, detail, settled, choose, settle
        )

    async def ruled(
        self,
        kind: str,
        subject: dict[str, Any],
        shown: str,
        decision: Decision,
        detail: dict[str, Any],
        *,
        overrules: Ruling | None = None,
    ) -> Ruling:
        """`govern` for a caller that awaits anyway (the proxy's judge, a command
        that could not start): the same four steps, the ruling awaited."""
        ruling = self.govern(kind, subject, shown, decision, detail, overrules=overrules)
        return ruling if isinstance(ruling, Ruling) else await ruling

    async def _govern_later(
        self,
        kind: str,
        request: int,
        subject: dict[str, Any],
        shown: str,
        decision: Decision,
        detail: dict[str, Any],
        settled: Settled | None,
        choose: Choose | None,
        settle: Settle | None,
    ) -> Ruling:
        if settled is None:
            self.on_event("waiting", {"kind": kind, "subject": shown, "reason": decision.reason})
            if settle is not None:
                settled = await settle()
            else:
                settled = await self.approvals.settle(kind, subject, shown, decision, detail)
        ruling, record = self._rule(kind, request, subject, decision, settled, choose, shown, detail)
        await self.audit.durable(record)
        return ruling

    def _rule(
        self,
        kind: str,
        request: int,
        subject: dict[str, Any],
        decision: Decision,
        settled: Settled,
        choose: Choose | None,
        shown: str = "",
        detail: dict[str, Any] | None = None,
    ) -> tuple[Ruling, dict[str, Any]]:
        """Choose the option, write the record(s), pause on a ``pause`` answer; the
        ruling and its (last) record."""
        option = None
        if choose is not None:
            settled, option = choose(settled)
        verdict, by, reason = settled
        record = self._write_record(kind, request, subject, decision, verdict, by, reason, option)
        if verdict is Verdict.ASK:
            if self.paused_on is None:
                # The request the attempt pauses on: the first asked, one request
                # whole (what the pause shows, `approve --request` checks and a
                # person's decision is matched on when it goes on), masked as the
                # log masks: a secret in a path or a command stays out of the state.
                self.paused_on = {
                    "seq": record.get("seq"),
                    "shown": self.audit.masker.text(whole_shown(shown, detail or {})),
                    "key": request_key(kind, subject, detail or {}),
                }
                self.end.pending = {
                    "kind": kind,
                    "request": request,
                    "subject": self.audit.masker.json(subject),
                    "reason": self.audit.masker.text(reason),
                }
            self.pause_requested.set()
        return Ruling(request, verdict, by, reason, option, record.get("seq")), record

    def number_after(self, requests: int) -> None:
        """Number this gate's requests after ``requests`` (a resumed attempt's
        second part: one request is one number across both parts)."""
        self._requests = max(self._requests, requests)

    @property
    def cancelled(self) -> bool:
        """Whether the turn is over or cancelled (`cancel`): a failure after
        it (a model API that stopped answering) cannot have cost the agent its
        turn, and must not fail an attempt that ended its turn."""
        return self.approvals.cancelled

    @property
    def requests(self) -> int:
        """How many requests this gate has numbered."""
        return self._requests

    def _next_request(self) -> int:
        self._requests += 1
        return self._requests

    def check_session(self, session_id: str) -> None:
        """Refuse a request for a session other than the attempt's."""
        if self.session_id is not None and session_id != self.session_id:
            raise RpcError(RESOURCE_NOT_FOUND, f"unknown session {session_id[:64]!r}")

    def _settle_now(
        self,
        kind: str,
        subject: dict[str, Any],
        shown: str,
        decision: Decision,
        detail: dict[str, Any] | None = None,
    ) -> Settled | None:
        """The final verdict when no approver is needed (allow, deny, a grant, a
        broken log, a cancelled turn); None for an ask."""
        if self.audit.broken is not None or self.failure is not None:
            return Verdict.DENY, who.FAILED, f"refused: {self.audit.broken or self.failure}"
        if self.approvals.cancelled:
            return Verdict.DENY, who.CANCELLED, "the turn was cancelled"
        if decision.verdict is not Verdict.ASK:
            return decision.verdict, decision.by, decision.reason
        if self.approvals.granted(kind, subject, shown, detail):
            return (
                Verdict.ALLOW,
                who.GRANT,
                f"allowed by a person's grant for this attempt ({decision.reason})",
            )
        carried = self.approvals.carried_by(kind, subject, shown)
        if carried is not None:  # one question per action: not a second wait
            return (
                Verdict.ALLOW,
                who.GRANT,
                f"allowed by a person (seq {carried}): the permission they allowed carries "
                f"it out ({decision.reason})",
            )
        return None

    def _write_record(
        self,
        kind: str,
        request: int,
        subject: dict[str, Any],
        decision: Decision,
        verdict: Verdict,
        by: str,
        reason: str,
        option: str | None = None,
    ) -> dict[str, Any]:
        """Append the decision's record (one per part of a compound decision) and
        tell whoever listens; the last record written."""
        word = "approval" if verdict is Verdict.ASK else str(verdict)
        parts = decision.parts
        # Not the policy's refusal: the turn was over, the attempt had failed
        # closed, or the request could not be carried out (the tally counts
        # these apart, as failed).
        failed = {who.CANCELLED: "cancelled", who.FAILED: "closed"}.get(by)
        if failed is None and verdict is Verdict.DENY and by == decision.by:
            failed = decision.failed
        written: list[dict[str, Any]] = []
        # A request of one record may be counted among repeated refusals; one of
        # several (parts, an overruling) is written whole, or it would count twice.
        thin = not parts and request != self._last_written
        self._last_written = request
        try:
            if not parts:  # one decision, one record: the usual case
                record = self.audit.append(
                    kind,
                    self._fields(request, subject, word, by, decision.rule, reason, option, failed),
                    thin=thin,
                )
                written.append(record)
            else:
                # A part the approver (or the option choice) settled takes the final
                # word; the others keep their own verdict, so the log shows which
                # part was asked.
                settled = [p.verdict is Verdict.ASK or len(parts) == 1 for p in parts]
                if (
                    verdict is Verdict.DENY
                    and not any(p.verdict is Verdict.DENY for p in parts)
                    and not any(p.verdict is Verdict.ASK for p in parts)
                ):
                    settled = [True] * len(parts)
                for part, final in zip(parts, settled, strict=True):
                    record = self.audit.append(
                        kind,
                        self._fields(
                            request,
                            subject,
                            word if final else str(part.verdict),
                            by if final else part.by,
                            part.rule,
                            reason if final else part.reason,
                            option,
                            failed if final else None,
                        ),
                        thin=False,
                    )
                    written.append(record)
        except AuditUnavailable as e:
            self.fail(str(e))
            raise RpcError(REFUSED, f"refused: {e}") from None
        if not self._quiet:
            # the reason of the part that carries the verdict, not of the last part
            told = next((r for r in reversed(written) if r.get("verdict") == word), record)
            self.on_event(
                kind,
                {  # as logged: masked (a secret in a path or a command stays out)
                    "subject": record.get("subject", subject),
                    "verdict": word,
                    "by": by,
                    "reason": told.get("reason", reason),
                    "rule": decision.rule,
                    "records": written,  # one per part
                },
            )
        return record

    def _fields(
        self,
        request: int,
        subject: dict[str, Any],
        verdict: str,
        by: str,
        rule: str,
        reason: str,
        option: str | None,
        failed: str | None = None,
    ) -> dict[str, Any]:
        """A decision record's fields in their order in the log (`AuditLog.append`)."""
        fields: dict[str, Any] = {
            "session": self.session_id,
            "request": request,
            "subject": subject,
            "verdict": verdict,
            "by": by,
            "rule": rule,
            "reason": reason,
        }
        if self.session_id is None:
            del fields["session"]
        if option is not None:
            fields["option"] = option
        if failed is not None:
            fields["failed"] = failed
        return fields

    def fail(self, why: str) -> None:
        """Fail closed: refuse everything from now on and end the turn (the attempt
        sends session/cancel, as for a pause, and ends failed naming `why`, the
        first reason given)."""
        if self.end.failure is None:
            self.end.failure = why
        self.pause_requested.set()

    def blocked(self, reason: str) -> None:
        """The agent's ``blocked`` tool was called (`governor.mcp.own_tools`): the
        `Ending` keeps its first reason, and the turn ends as a pause does
        (`pause_requested`, which the attempt watches)."""
        if self.end.blocked is None:
            self.end.blocked = reason
        self.pause_requested.set()

    # -- session/request_permission -------------------------------------------------

    def request_permission(
        self, req: schema.RequestPermissionRequest
    ) -> schema.RequestPermissionResponse | Awaitable[schema.RequestPermissionResponse]:
        """Decide a tool call from its kind, title and raw input; choose the option by effect."""
        self.check_session(req.session_id)
        call = req.tool_call
        state = self.tool_calls.upsert(call)
        state.governed = True
        kind = state.kind
        raw = state.raw_input if isinstance(state.raw_input, Mapping) else None
        # Qwen Code titles an MCP tool's permission with its arguments and names
        # the tool in _meta.toolName (`mcp__SERVER__TOOL`): the agent's word, as the title is.
        meta = call.field_meta
        named = meta.get("toolName") if isinstance(meta, Mapping) else None
        tool_name = named if isinstance(named, str) and named else None
        action = ToolPermission(kind, state.title, raw, state.locations, tool_name=tool_name)
        decision = decide(action, self.policy)
        subject: dict[str, Any] = {
            "tool_call": call.tool_call_id,
            "title": state.title,
            "tool_kind": kind,
        }
        if tool_name is not None:
            subject["tool_name"] = tool_name
        command = raw.get("command") if raw else None
        if isinstance(command, (str, list)):
            subject["command"] = (
                command if isinstance(command, str) else shlex.join(map(str, command))
            )
        if state.locations:
            subject["paths"] = list(state.locations)
        if raw:
            subject["input"] = recorded_input(raw)  # what `governor audit replay` rebuilds from
        shown = str(subject.get("command") or state.title or call.tool_call_id)
        offered = tuple((o.option_id, o.name, o.kind) for o in req.options)

        def choose(settled: Settled) -> tuple[Settled, str | None]:
            verdict, by, reason = settled
            choice = choose_offered(offered, verdict, self.policy.allow_mode_switch)
            if verdict is Verdict.ALLOW and choice.option_id is None:
                verdict, by, reason = Verdict.DENY, who.OPTIONS, f"{reason}; but {choice.reason}"
            elif verdict is not Verdict.ALLOW:
                choice = choose_offered(offered, Verdict.DENY, False)
            return (verdict, by, reason), choice.option_id or "cancelled"

        detail = {"tool_kind": kind, "raw_input": raw or {}, "title": state.title,
                  "command": subject.get("command"), "paths": list(state.locations)}
        self.carried.allowances.end()  # the next permission ends the last one's window
        ruling = self.govern("permission", subject, shown, decision, detail, choose)

        def answer(ruling: Ruling) -> schema.RequestPermissionResponse:
            response = self._permission_response(ruling)
            if ruling.allowed and isinstance(response.outcome, schema.AllowedOutcome):
                named = named_paths(state.locations, command, self.policy.workspace)
                self.carried.allowances.allow(call.tool_call_id, ruling.seq, named)
                if ruling.by == who.PERSON:
                    self.approvals.carry(subject, ruling.seq)
            return response

        return then(ruling, answer)

    def _permission_response(self, ruling: Ruling) -> schema.RequestPermissionResponse:
        """The answer selecting the ruling's option (``cancelled`` after session/cancel).
        Agents offer the same few option ids every time: each answer is built once
        (a few kept)."""
        option_id = (
            None if self.approvals.cancelled or ruling.option == "cancelled" else ruling.option
        )
        response = self._responses.get(option_id)
        if response is None:
            outcome: schema.AllowedOutcome | schema.DeniedOutcome
            if option_id is None:
                outcome = schema.DeniedOutcome(outcome="cancelled")
            else:
                outcome = schema.AllowedOutcome(outcome="selected", option_id=option_id)
            response = schema.RequestPermissionResponse(outcome=outcome)
            if len(self._responses) < _RESPONSES_KEPT and len(option_id or "") <= CACHED_TEXT:
                self._responses[option_id] = response
        return response

    # -- elicitation/create -------------------------------------------------------------

    def create_elicitation(
        self, req: elicitation.ElicitationRequest, *, origin: str | None = None
    ) -> elicitation.ElicitationReply | Awaitable[elicitation.ElicitationReply]:
        """Put the agent's form to the person, or decline (`governor.gate.elicitation`);
        governed like any request, so a gate that failed closed never shows it.
        ``origin`` names who asks when it is not the agent (``mcp:NAME``)."""
        request = req.root
        if isinstance(getattr(request, "session_id", None), str):
            self.check_session(request.session_id)
        person = elicitation.person_of(self.approvals.approver)
        decision = elicitation.decide(request, person)
        subject = elicitation.subject_of(request)
        if origin is not None:
            subject["origin"] = origin
        filled: list[elicitation.ElicitationReply] = []

        async def fill() -> Settled:
            assert person is not None  # an ask only when a person is there
            settled, answer = await elicitation.ask(request, person)
            filled.append(answer)
            return settled

        def choose(settled: Settled) -> tuple[Settled, str | None]:
            allowed = settled[0] is Verdict.ALLOW and bool(filled)
            return settled, (filled[0] if allowed else elicitation.DECLINE)["action"]

        ruling = self.govern(
            "elicitation", subject, request.message, decision, {}, choose, settle=fill
        )

        def answer(ruling: Ruling) -> elicitation.ElicitationReply:
            return filled[0] if ruling.allowed and filled else elicitation.DECLINE

        return then(ruling, answer)

    # -- what the agent reports --------------------------------------------------------

    def observe_tool_call(self, update: Mention) -> ToolCallState:
        """Upsert a ``tool_call`` / ``tool_call_update``; record unasked or reported work."""
        state = self.tool_calls.upsert(update)
        carried = self.carried
        if state.status in ("completed", "failed"):
            carried.allowances.end(state.id)
        if newly_completed(state) and not explained(
            state, carried.written, carried.read_paths, carried.terminals
        ):
            self._report(state)
        return state

    def _report(self, state: ToolCallState) -> None:
        kind, subject, reason = report(state)
        try:
            self.audit.record(
                kind,
                session=self.session_id,
                subject=subject,
                verdict=kind,  # ``unasked`` or ``reported``: the tally's word for it
                by=who.AGENT,
                reason=reason,
            )
        except AuditUnavailable as e:
            self.fail(str(e))
        self.on_event(kind, {"subject": subject})

    def cancel(self) -> None:
        """After ``session/cancel``: pending and later asks are answered cancelled."""
        self.approvals.cancel()


def _own_ending(audit: AuditLog) -> Ending:
    """The `Ending` of a gate that serves no attempt (a test, a bench)."""
    return Ending(agent="agent", preset="acp", run_id=audit.attempt, elapsed_s=0.0, timeout_s=0.0)
