"""The gate: every request the agent makes is decided here, recorded, then answered.

Rules of this file (everything that turns an agent's request into an answer):

1. The request becomes a `policies` action and `policies.decide` judges it.
2. An ``ask`` goes to the approver (unless a person's grant covers it).
3. The decision is written to the audit log -- handed to the OS, and fsynced
   when durability is ``always`` -- **before** the answer is returned.
4. Only then does anything happen: a refused write never touches the disk, a
   refused command never starts.

One method owns the four steps, `Gate.govern`; each handler builds its
action and subject, calls it once, and acts on the `Ruling` it gets. A ruling
that needs neither an approver nor an fsync is made at once, and the answer
goes back in the same pass over the agent's line (no task); otherwise it
comes later. `govern` and `_then` are the only places that know the two apart.

If the audit log cannot be written, nothing more is allowed: every further
request is refused (fail closed) and the attempt ends ``failed``.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shlex
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar, cast

import structlog
import trio
from acp import schema

from governor import elicitation
from governor.acp.dispatch import Route, Routes, RpcError
from governor.acp.jsonrpc import INVALID_PARAMS, RESOURCE_NOT_FOUND
from governor.approver import Approvals, Approver, Settled
from governor.attribution import Allowances
from governor.audit.log import AuditLog, AuditUnavailable, recorded_input
from governor.confine import GovernedTerminals
from governor.fsaccess import (
    FileAccessError,
    open_text,
    read_opened,
    read_text,
    resolve,
    write_text,
)
from governor.toolcalls import (
    Mention,
    ToolCalls,
    ToolCallState,
    explained,
    named_paths,
    newly_completed,
    report,
)
from policies.actions import ReadFile, RunCommand, ToolPermission, WriteFile
from policies.decide import Decision, decide
from policies.options import CACHED_TEXT, choose_offered
from policies.paths import normalize
from policies.policy import Policy
from policies.rules import Verdict
from sandbox import BwrapUnavailable, ProfileError

log = structlog.get_logger("governor.gate")

REFUSED: Final = -32001
"""Our answer to a refused fs or terminal request (ACP defines no code for it)."""

_RESPONSES_KEPT: Final = 32
"""Permission answers kept built, one per option id (ids are the agent's to choose)."""


@dataclass(frozen=True, slots=True)
class Ruling:
    """The final word on one request, as recorded: the verdict, who gave it and
    why, the permission option chosen (permissions only)."""

    request: int
    verdict: Verdict
    by: str
    reason: str
    option: str | None = None
    seq: int | None = None
    """The seq of its (last) record in the audit log."""

    @property
    def allowed(self) -> bool:
        """Whether the request may be carried out."""
        return self.verdict is Verdict.ALLOW


Choose = Callable[[Settled], tuple[Settled, str | None]]
"""How a permission picks its option: the settled verdict -> (final, option id)."""

T = TypeVar("T")


def _then(ruling: Ruling | Awaitable[Ruling], act: Callable[[Ruling], T]) -> T | Awaitable[T]:
    """`act` on the ruling now when it is made, or once it is (the fast path's
    other half: see the module docstring)."""
    if isinstance(ruling, Ruling):
        return act(ruling)

    async def later() -> T:
        answer: Any = act(await ruling)
        if inspect.isawaitable(answer):
            answer = await answer
        return cast(T, answer)

    return later()


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
    ) -> None:
        self.policy = policy
        self.audit = audit
        self.approvals = Approvals(approver)
        self.terminals = terminals
        self.on_event = on_event or (lambda kind, info: None)
        self._quiet = on_event is None  # nobody listens: no event to build
        self.session_id: str | None = None
        self.tool_calls = ToolCalls()
        self.pending: dict[str, Any] | None = None
        self.pause_requested = trio.Event()
        self.written: dict[str, tuple[int, int]] = {}
        """Paths the governor wrote, with (size, mtime_ns) right after the write."""
        self.governed_terminals: set[str] = set()
        self.read_paths: set[str] = set()
        """Paths read through the governor (as the agent named them)."""
        self.allowances = Allowances()
        """Every allowed permission, for what the agent then did itself."""
        self._requests = 0
        self.failure: str | None = None
        self._responses: dict[str | None, schema.RequestPermissionResponse] = {}
        self._routes: Routes | None = None

    # -- the handler table ----------------------------------------------------------

    def routes(self) -> Routes:
        """Method -> (params model, handler) for `governor.acp.dispatch`, built once:
        it also counts the methods the agent asked for that the governor does not know."""
        if self._routes is None:
            self._routes = Routes(self._table())
        return self._routes

    def _table(self) -> dict[str, Route]:
        table = {
            "session/request_permission": Route(
                schema.RequestPermissionRequest, self.request_permission
            ),
            "fs/read_text_file": Route(schema.ReadTextFileRequest, self.read_text_file),
            "fs/write_text_file": Route(schema.WriteTextFileRequest, self.write_text_file),
            "elicitation/create": Route(elicitation.Request, self.create_elicitation),
        }
        if self.terminals is not None:
            table.update(
                {
                    "terminal/create": Route(schema.CreateTerminalRequest, self.create_terminal),
                    "terminal/output": Route(schema.TerminalOutputRequest, self.terminal_output),
                    "terminal/wait_for_exit": Route(
                        schema.WaitForTerminalExitRequest, self.wait_for_terminal_exit
                    ),
                    "terminal/kill": Route(schema.KillTerminalRequest, self.kill_terminal),
                    "terminal/release": Route(schema.ReleaseTerminalRequest, self.release_terminal),
                }
            )
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
    ) -> Ruling | Awaitable[Ruling]:
        """The ruling on one request, recorded before it is returned.

        `decision` is the engine's; an ``ask`` goes to the approver (unless a
        person's grant covers it); `choose` picks a permission's option by
        effect. The record is handed to the OS before the ruling is returned,
        and fsynced first when durability is ``always``. Made at once (a
        `Ruling`) when nothing needs waiting for, else later (an awaitable)."""
        request = self._next_request()
        settled = self._settle_now(kind, subject, shown, decision)
        if settled is not None and self.audit.durability != "always":
            return self._rule(kind, request, subject, decision, settled, choose)[0]
        return self._govern_later(kind, request, subject, shown, decision, detail, settled, choose)

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
    ) -> Ruling:
        if settled is None:
            self.on_event("waiting", {"kind": kind, "subject": shown, "reason": decision.reason})
            settled = await self.approvals.settle(kind, subject, shown, decision, detail)
        ruling, record = self._rule(kind, request, subject, decision, settled, choose)
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
    ) -> tuple[Ruling, dict[str, Any]]:
        """Choose the option, write the record(s), pause on a ``pause`` answer; the
        ruling and its (last) record."""
        option = None
        if choose is not None:
            settled, option = choose(settled)
        verdict, by, reason = settled
        record = self._write_record(kind, request, subject, decision, verdict, by, reason, option)
        if verdict is Verdict.ASK:
            self.pending = {"kind": kind, "request": request, "subject": subject, "reason": reason}
            self.pause_requested.set()
        return Ruling(request, verdict, by, reason, option, record.get("seq")), record

    def _next_request(self) -> int:
        self._requests += 1
        return self._requests

    def _check_session(self, session_id: str) -> None:
        if self.session_id is not None and session_id != self.session_id:
            raise RpcError(RESOURCE_NOT_FOUND, f"unknown session {session_id[:64]!r}")

    def _settle_now(
        self, kind: str, subject: dict[str, Any], shown: str, decision: Decision
    ) -> Settled | None:
        """The final verdict when no approver is needed (allow, deny, a grant, a
        broken log, a cancelled turn); None for an ask."""
        if self.audit.broken is not None or self.failure is not None:
            return Verdict.DENY, "ceiling", f"refused: {self.audit.broken or self.failure}"
        if self.approvals.cancelled:
            return Verdict.DENY, "policy", "the turn was cancelled"
        if decision.verdict is not Verdict.ASK:
            return decision.verdict, decision.by, decision.reason
        if self.approvals.granted(kind, subject, shown):
            return (
                Verdict.ALLOW,
                "grant",
                f"allowed by a person's grant for this attempt ({decision.reason})",
            )
        carried = self.approvals.carried_by(kind, subject, shown)
        if carried is not None:  # one question per action: not a second wait
            return (
                Verdict.ALLOW,
                "grant",
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
        written: list[dict[str, Any]] = []
        try:
            if not parts:  # one decision, one record: the usual case
                record = self.audit.append(
                    kind,
                    self._fields(request, subject, word, by, decision.rule, reason, option),
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
                        ),
                    )
                    written.append(record)
        except AuditUnavailable as e:
            self._fail(str(e))
            raise RpcError(REFUSED, f"refused: {e}") from None
        if not self._quiet:
            self.on_event(
                kind,
                {  # as logged: masked (a secret in a path or a command stays out)
                    "subject": record.get("subject", subject),
                    "verdict": word,
                    "by": by,
                    "reason": record.get("reason", reason),
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
        return fields

    def _fail(self, why: str) -> None:
        """Fail closed: refuse everything from now on and end the turn (the attempt
        sends session/cancel, as for a pause, and ends failed naming `why`)."""
        if self.failure is None:
            self.failure = why
        self.pause_requested.set()

    # -- session/request_permission -------------------------------------------------

    def request_permission(
        self, req: schema.RequestPermissionRequest
    ) -> schema.RequestPermissionResponse | Awaitable[schema.RequestPermissionResponse]:
        """Decide a tool call from its kind, title and raw input; choose the option by effect."""
        self._check_session(req.session_id)
        call = req.tool_call
        state = self.tool_calls.upsert(call)
        state.governed = True
        kind = state.kind
        raw = state.raw_input if isinstance(state.raw_input, Mapping) else None
        decision = decide(ToolPermission(kind, state.title, raw, state.locations), self.policy)
        subject: dict[str, Any] = {
            "tool_call": call.tool_call_id,
            "title": state.title,
            "tool_kind": kind,
        }
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
                verdict, by, reason = Verdict.DENY, "policy", f"{reason}; but {choice.reason}"
            elif verdict is not Verdict.ALLOW:
                choice = choose_offered(offered, Verdict.DENY, False)
            return (verdict, by, reason), choice.option_id or "cancelled"

        detail = {"tool_kind": kind, "raw_input": raw or {}, "title": state.title,
                  "command": subject.get("command"), "paths": list(state.locations)}
        self.allowances.end()  # the next permission ends the last one's window
        ruling = self.govern("permission", subject, shown, decision, detail, choose)

        def answer(ruling: Ruling) -> schema.RequestPermissionResponse:
            response = self._permission_response(ruling)
            if ruling.allowed and isinstance(response.outcome, schema.AllowedOutcome):
                named = named_paths(state.locations, command, self.policy.workspace)
                self.allowances.allow(call.tool_call_id, ruling.seq, named)
                if ruling.by == "person":
                    self.approvals.carry(subject, ruling.seq)
            return response

        return _then(ruling, answer)

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

    # -- fs ---------------------------------------------------------------------------

    def read_text_file(
        self, req: schema.ReadTextFileRequest
    ) -> schema.ReadTextFileResponse | Awaitable[schema.ReadTextFileResponse]:
        """A governed read: resolved, inside the roots, not hidden."""
        self._check_session(req.session_id)
        path = self._resolved(req.path)
        decision = decide(ReadFile(path), self.policy)
        if path != req.path and decision.allowed:
            # A symlink's own name may be hidden even when its target is not.
            first = decide(ReadFile(normalize(req.path)), self.policy)
            decision = first if not first.allowed else decision
        subject = {"path": req.path} | ({"resolved": path} if path != req.path else {})
        ruling = self.govern("read", subject, path, decision, {})
        return cast(
            schema.ReadTextFileResponse | Awaitable[schema.ReadTextFileResponse],
            _then(ruling, lambda r: self._read(req, path, r)),
        )

    def _read(
        self, req: schema.ReadTextFileRequest, path: str, ruling: Ruling
    ) -> schema.ReadTextFileResponse | Awaitable[schema.ReadTextFileResponse]:
        """The file's text once the read is allowed: a small file read here and now,
        a larger one in a worker thread (the answer then comes later)."""
        if not ruling.allowed:
            raise RpcError(REFUSED, f"Refused by the governor: {ruling.reason}")
        self.read_paths.add(normalize(req.path))
        try:
            opened = open_text(path, req.line, req.limit)
            if opened.size > INLINE_READ_BYTES:
                # Read again by the worker: no descriptor waits in a task that
                # may never start.
                opened.close()
                return self._read_in_worker(path, req)
            content = read_opened(opened, req.line, req.limit)
        except FileAccessError as e:
            raise RpcError(e.code, str(e)) from None
        return schema.ReadTextFileResponse(content=content)

    async def _read_in_worker(
        self, path: str, req: schema.ReadTextFileRequest
    ) -> schema.ReadTextFileResponse:
        try:
            content = await trio.to_thread.run_sync(read_text, path, req.line, req.limit)
        except FileAccessError as e:
            raise RpcError(e.code, str(e)) from None
        return schema.ReadTextFileResponse(content=content)

    def write_text_file(
        self, req: schema.WriteTextFileRequest
    ) -> Awaitable[schema.WriteTextFileResponse]:
        """A governed write: capability, roots, protected paths; symlink-safe and atomic."""
        self._check_session(req.session_id)
        path = self._resolved(req.path)
        decision = decide(WriteFile(path), self.policy)
        if path != req.path and decision.allowed:
            first = decide(WriteFile(normalize(req.path)), self.policy)
            decision = first if not first.allowed else decision
        subject = {"path": req.path, "bytes": len(req.content.encode())} | (
            {"resolved": path} if path != req.path else {}
        )
        ruling = self.govern("write", subject, path, decision, {"content": req.content})
        return cast(
            Awaitable[schema.WriteTextFileResponse],
            _then(ruling, lambda r: self._write(req, path, r)),
        )

    async def _write(
        self, req: schema.WriteTextFileRequest, path: str, ruling: Ruling
    ) -> schema.WriteTextFileResponse:
        if not ruling.allowed:
            raise RpcError(REFUSED, f"Refused by the governor: {ruling.reason}")
        try:
            await trio.to_thread.run_sync(write_text, path, req.content)
        except FileAccessError as e:
            raise RpcError(e.code, str(e)) from None
        try:
            st = os.stat(path)
            self.written[path] = (st.st_size, st.st_mtime_ns)
        except OSError:
            pass
        return schema.WriteTextFileResponse()

    def _resolved(self, path: str) -> str:
        try:
            return resolve(path)
        except FileAccessError as e:
            raise RpcError(INVALID_PARAMS, f"Invalid params: {e}") from None

    # -- elicitation/create -------------------------------------------------------------

    async def create_elicitation(self, req: elicitation.Request) -> elicitation.Answer:
        """Put the agent's form to the person, or decline (`governor.elicitation`);
        recorded before it is answered."""
        request = req.root
        if isinstance(getattr(request, "session_id", None), str):
            self._check_session(request.session_id)
        person = (
            None if self.approvals.cancelled else elicitation.person_of(self.approvals.approver)
        )
        number = self._next_request()
        decision, answer = await elicitation.answer(request, person)
        verdict, by, reason = decision.verdict, decision.by, decision.reason
        subject = elicitation.subject_of(request)
        record = self._write_record(
            "elicitation", number, subject, decision, verdict, by, reason, answer["action"]
        )
        await self.audit.durable(record)
        return answer

    # -- terminals ----------------------------------------------------------------------

    def create_terminal(
        self, req: schema.CreateTerminalRequest
    ) -> Awaitable[schema.CreateTerminalResponse]:
        """Decide the command first; a refused command never starts."""
        self._check_session(req.session_id)
        args = list(req.args or [])
        # As the sandbox runs it: no args means a shell line (claude-code-acp sends
        # whole lines in `command`), args mean `command` is the program.
        command: str | tuple[str, ...] = (req.command, *args) if args else req.command
        cwd = req.cwd or self.policy.workspace
        if not cwd.startswith("/"):
            raise RpcError(INVALID_PARAMS, "Invalid params: cwd: must be an absolute path")
        env_names = tuple(e.name for e in (req.env or []))
        decision = decide(RunCommand(command, cwd, env_names), self.policy)
        shown = command if isinstance(command, str) else shlex.join(command)
        subject = {"command": shown, "cwd": cwd} | ({"env": list(env_names)} if env_names else {})
        if not isinstance(command, str):
            subject["argv"] = list(command)  # an argv is judged without a shell: replay needs it
        ruling = self.govern("terminal", subject, shown, decision, {})
        return cast(
            Awaitable[schema.CreateTerminalResponse],
            _then(ruling, lambda r: self._start(req, args, cwd, subject, r)),
        )

    async def _start(
        self,
        req: schema.CreateTerminalRequest,
        args: list[str],
        cwd: str,
        subject: dict[str, Any],
        ruling: Ruling,
    ) -> schema.CreateTerminalResponse:
        if not ruling.allowed:
            raise RpcError(REFUSED, f"Refused by the governor: {ruling.reason}")
        assert self.terminals is not None
        env = {e.name: e.value for e in (req.env or [])}
        try:
            terminal_id: str = await self.terminals.create(
                req.command, args, env=env, cwd=cwd, output_byte_limit=req.output_byte_limit
            )
        except ProfileError as e:
            raise RpcError(INVALID_PARAMS, f"Invalid params: {e}") from None
        except (BwrapUnavailable, OSError) as e:
            # The command could not start in its sandbox (bwrap gone, broken): it never
            # runs bare. The log says so next to the allow, and the attempt fails closed.
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            self._fail(f"the sandbox stopped working: {why}")
            with contextlib.suppress(AuditUnavailable):
                self.audit.record(
                    "terminal",
                    session=self.session_id,
                    request=ruling.request,
                    subject=subject,
                    verdict="deny",
                    by="sandbox",
                    rule="sandbox: unavailable",
                    reason=f"not started: {self.failure}",
                )
            raise RpcError(REFUSED, f"Refused by the governor: {self.failure}") from None
        self.governed_terminals.add(terminal_id)
        return schema.CreateTerminalResponse(terminal_id=terminal_id)

    async def terminal_output(
        self, req: schema.TerminalOutputRequest
    ) -> schema.TerminalOutputResponse:
        """The output so far (newest bytes), truncation flag, exit status once exited."""
        output, truncated, status = self._known(req.session_id, req.terminal_id).output(
            req.terminal_id
        )
        exit_status = (
            None
            if status is None
            else schema.TerminalExitStatus(exit_code=status[0], signal=status[1])
        )
        return schema.TerminalOutputResponse(
            output=output, truncated=truncated, exit_status=exit_status
        )

    async def wait_for_terminal_exit(
        self, req: schema.WaitForTerminalExitRequest
    ) -> schema.WaitForTerminalExitResponse:
        """Answered when the command exits."""
        terminals = self._known(req.session_id, req.terminal_id)
        code, signal = await terminals.wait_for_exit(req.terminal_id)
        return schema.WaitForTerminalExitResponse(exit_code=code, signal=signal)

    async def kill_terminal(self, req: schema.KillTerminalRequest) -> schema.KillTerminalResponse:
        """Kill the command; the terminal stays valid for output and wait."""
        await self._known(req.session_id, req.terminal_id).kill(req.terminal_id)
        return schema.KillTerminalResponse()

    async def release_terminal(
        self, req: schema.ReleaseTerminalRequest
    ) -> schema.ReleaseTerminalResponse:
        """Kill a still-running command and free its buffer; the id is then invalid."""
        await self._known(req.session_id, req.terminal_id).release(req.terminal_id)
        return schema.ReleaseTerminalResponse()

    def _known(self, session_id: str, terminal_id: str) -> GovernedTerminals:
        """The terminals, once the session and the terminal id are known ones."""
        self._check_session(session_id)
        assert self.terminals is not None
        try:
            self.terminals.output(terminal_id)
            return self.terminals
        except LookupError:
            raise RpcError(RESOURCE_NOT_FOUND, f"unknown terminal {terminal_id[:64]!r}") from None

    # -- what the agent reports --------------------------------------------------------

    def observe_tool_call(self, update: Mention) -> ToolCallState:
        """Upsert a ``tool_call`` / ``tool_call_update``; record unasked or reported work."""
        state = self.tool_calls.upsert(update)
        if state.status in ("completed", "failed"):
            self.allowances.end(state.id)
        if newly_completed(state) and not explained(
            state, self.written, self.read_paths, self.governed_terminals
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
                verdict="reported",
                by="agent",
                reason=reason,
            )
        except AuditUnavailable as e:
            self._fail(str(e))
        self.on_event(kind, {"subject": subject})

    def cancel(self) -> None:
        """After ``session/cancel``: pending and later asks are answered cancelled."""
        self.approvals.cancel()


INLINE_READ_BYTES: Final = 256 * 1024
"""Files up to this size are read on the trio thread; larger ones in a worker."""
