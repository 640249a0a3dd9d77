"""The gate: every request the agent makes is decided here, recorded, then answered.

Rules of this file (everything that turns an agent's request into an answer):

1. The request becomes a `policies` action and `policies.decide` judges it.
2. An ``ask`` goes to the approver (unless a person's grant covers it).
3. The decision is written to the audit log -- handed to the OS, and fsynced
   when durability is ``always`` -- **before** the answer is returned.
4. Only then does anything happen: a refused write never touches the disk, a
   refused command never starts.

If the audit log cannot be written, nothing more is allowed: every further
request is refused (fail closed) and the attempt ends ``failed``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

import structlog
import trio
from acp import schema

from governor.acp.dispatch import Route, RpcError
from governor.acp.jsonrpc import INVALID_PARAMS, RESOURCE_NOT_FOUND
from governor.approver import Answer, Approver, Ask
from governor.audit.log import AuditLog, AuditUnavailable, recorded_input
from governor.fsaccess import (
    FileAccessError,
    open_text,
    read_opened,
    read_text,
    resolve,
    write_text,
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

UNASKED_KINDS: Final = frozenset({"edit", "delete", "move", "execute"})

_RESPONSES_KEPT: Final = 32
"""Permission answers kept built, one per option id (ids are the agent's to choose)."""


@dataclass(slots=True)
class ToolCallState:
    """What the agent has reported about one tool call (upserted)."""

    id: str
    title: str = ""
    kind: str | None = None
    status: str = "pending"
    raw_input: Any = None
    locations: tuple[str, ...] = ()
    terminals: tuple[str, ...] = ()
    governed: bool = False
    judged: bool = False


class Paused(Exception):
    """An ask was answered ``pause``: the attempt ends needs_approval."""


class Gate:
    """The single decision point for one attempt's agent-to-client requests."""

    def __init__(
        self,
        policy: Policy,
        audit: AuditLog,
        approver: Approver,
        *,
        terminals: Any | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        self.policy = policy
        self.audit = audit
        self.approver = approver
        self.terminals = terminals
        self.on_event = on_event or (lambda kind, info: None)
        self._quiet = on_event is None  # nobody listens: no event to build
        self.session_id: str | None = None
        self.tool_calls: dict[str, ToolCallState] = {}
        self.grants: set[tuple[str, str]] = set()
        self.pending: dict[str, Any] | None = None
        self.pause_requested = trio.Event()
        self.written: dict[str, tuple[int, int]] = {}
        """Paths the governor wrote, with (size, mtime_ns) right after the write."""
        self.command_windows: list[tuple[int, int | None]] = []
        """(start, end) in time.time_ns of each governed command, for attributing changes."""
        self.governed_terminals: set[str] = set()
        self.read_paths: set[str] = set()
        """Paths read through the governor (as the agent named them)."""
        self._requests = 0
        self.failure: str | None = None
        self._cancelled = False
        self._cancel_event = trio.Event()
        self._responses: dict[str | None, schema.RequestPermissionResponse] = {}

    # -- the handler table ----------------------------------------------------------

    def routes(self) -> dict[str, Route]:
        """Method -> (params model, handler) for `governor.acp.dispatch`."""
        table = {
            "session/request_permission": Route(
                schema.RequestPermissionRequest, self.request_permission
            ),
            "fs/read_text_file": Route(schema.ReadTextFileRequest, self.read_text_file),
            "fs/write_text_file": Route(schema.WriteTextFileRequest, self.write_text_file),
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

    # -- deciding, recording --------------------------------------------------------

    def _next_request(self) -> int:
        self._requests += 1
        return self._requests

    def _check_session(self, session_id: str) -> None:
        if self.session_id is not None and session_id != self.session_id:
            raise RpcError(RESOURCE_NOT_FOUND, f"unknown session {session_id[:64]!r}")

    def _settle_now(
        self, kind: str, subject: dict[str, Any], shown: str, decision: Decision
    ) -> tuple[Verdict, str, str] | None:
        """The final verdict as (verdict, by, reason) when no approver is needed
        (allow, deny, a grant, a broken log, a cancelled turn); None for an ask."""
        if self.audit.broken is not None or self.failure is not None:
            return Verdict.DENY, "ceiling", f"refused: {self.audit.broken or self.failure}"
        if self._cancelled:
            return Verdict.DENY, "policy", "the turn was cancelled"
        if decision.verdict is not Verdict.ASK:
            return decision.verdict, decision.by, decision.reason
        if self._grant_key(kind, subject, shown) in self.grants:
            return (
                Verdict.ALLOW,
                "grant",
                f"allowed by a person's grant for this attempt ({decision.reason})",
            )
        return None

    @staticmethod
    def _grant_key(kind: str, subject: dict[str, Any], shown: str) -> tuple[str, str]:
        # A grant covers the same subject however it comes back: a command granted in
        # a permission request is the same command in the terminal/create after it.
        return ("command" if kind == "terminal" or "command" in subject else kind, shown)

    def _answers_now(self) -> bool:
        """Whether a settled decision may be answered without waiting: only an
        fsync (durability always) makes the answer wait for the disk."""
        return self.audit.durability != "always"

    async def _settle(
        self,
        kind: str,
        subject: dict[str, Any],
        shown: str,
        decision: Decision,
        detail: dict[str, Any],
    ) -> tuple[Verdict, str, str]:
        """The final verdict after the approver, as (verdict, by, reason)."""
        settled = self._settle_now(kind, subject, shown, decision)
        if settled is not None:
            return settled
        key = self._grant_key(kind, subject, shown)
        self.on_event("waiting", {"kind": kind, "subject": shown, "reason": decision.reason})
        answer = await self._ask_approver(Ask(kind, shown, decision.reason, decision.rule, detail))
        if answer is None:
            return (
                Verdict.DENY,
                "policy",
                f"the turn was cancelled while waiting for approval ({decision.reason})",
            )
        if answer == "once":
            return Verdict.ALLOW, "person", f"allowed once by a person ({decision.reason})"
        if answer == "always":
            self.grants.add(key)
            return (
                Verdict.ALLOW,
                "person",
                f"allowed by a person for the rest of this attempt ({decision.reason})",
            )
        if answer == "pause":
            return Verdict.ASK, "policy", f"waiting for a person's approval: {decision.reason}"
        who = (
            "a person"
            if self.approver.name in ("person", "callback")
            else "nobody is there to approve (unattended)"
        )
        by = "person" if self.approver.name in ("person", "callback") else "policy"
        return Verdict.DENY, by, f"refused: {decision.reason}; {who}"

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
        word = "approval" if verdict is Verdict.ASK else str(verdict)
        parts = decision.parts
        try:
            if not parts:  # one decision, one record: the usual case
                record = self.audit.append(
                    kind,
                    self._fields(request, subject, word, by, decision.rule, reason, option),
                )
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
        except AuditUnavailable as e:
            self._fail(str(e))
            raise RpcError(REFUSED, f"refused: {e}") from None
        self._recorded(kind, subject, word, by, reason, decision)
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

    def _recorded(
        self,
        kind: str,
        subject: dict[str, Any],
        word: str,
        by: str,
        reason: str,
        decision: Decision,
    ) -> None:
        if self._quiet:
            return
        self.on_event(
            kind,
            {
                "subject": subject,
                "verdict": word,
                "by": by,
                "reason": reason,
                "rule": decision.rule,
            },
        )

    async def _record(self, *args: Any) -> dict[str, Any]:
        """`_write_record`, then wait for the disk when durability says so."""
        record = self._write_record(*args)
        await self.audit.durable(record)
        return record

    def _fail(self, why: str) -> None:
        """Fail closed: refuse everything from now on and end the turn (the attempt
        sends session/cancel, as for a pause, and ends failed naming `why`)."""
        if self.failure is None:
            self.failure = why
        self.pause_requested.set()

    def _pause(self, kind: str, request: int, subject: dict[str, Any], reason: str) -> None:
        self.pending = {"kind": kind, "request": request, "subject": subject, "reason": reason}
        self.pause_requested.set()

    # -- session/request_permission -------------------------------------------------

    def request_permission(
        self, req: schema.RequestPermissionRequest
    ) -> schema.RequestPermissionResponse | Awaitable[schema.RequestPermissionResponse]:
        """Decide a tool call from its kind, title and raw input; choose the option by effect.

        Answered at once when no approver and no fsync is needed (the usual case:
        the record is still handed to the OS first); otherwise later."""
        self._check_session(req.session_id)
        call = req.tool_call
        state = self._tool_call(call.tool_call_id)
        self._upsert(state, call)
        state.governed = True
        kind = state.kind
        raw = state.raw_input if isinstance(state.raw_input, Mapping) else None
        action = ToolPermission(kind, state.title, raw, state.locations)
        decision = decide(action, self.policy)
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
        shown = subject.get("command") or state.title or call.tool_call_id
        request = self._next_request()
        shown = str(shown)
        settled = self._settle_now("permission", subject, shown, decision)
        if settled is None or not self._answers_now():
            return self._permission_later(req, subject, shown, decision, request, settled, raw)
        return self._permission_answer(req, subject, decision, request, settled)[0]

    async def _permission_later(
        self,
        req: schema.RequestPermissionRequest,
        subject: dict[str, Any],
        shown: str,
        decision: Decision,
        request: int,
        settled: tuple[Verdict, str, str] | None,
        raw: Mapping[str, Any] | None,
    ) -> schema.RequestPermissionResponse:
        if settled is None:
            settled = await self._settle(
                "permission",
                subject,
                shown,
                decision,
                {"tool_kind": subject.get("tool_kind"), "raw_input": raw or {}},
            )
        response, record = self._permission_answer(req, subject, decision, request, settled)
        await self.audit.durable(record)
        return response

    def _permission_answer(
        self,
        req: schema.RequestPermissionRequest,
        subject: dict[str, Any],
        decision: Decision,
        request: int,
        settled: tuple[Verdict, str, str],
    ) -> tuple[schema.RequestPermissionResponse, dict[str, Any]]:
        """Choose the option by effect, write the record, build the answer."""
        verdict, by, reason = settled
        offered = tuple((o.option_id, o.name, o.kind) for o in req.options)
        choice = choose_offered(offered, verdict, self.policy.allow_mode_switch)
        if verdict is Verdict.ALLOW and choice.option_id is None:
            verdict, by, reason = Verdict.DENY, "policy", f"{reason}; but {choice.reason}"
        elif verdict is not Verdict.ALLOW:
            choice = choose_offered(offered, Verdict.DENY, False)
        record = self._write_record(
            "permission",
            request,
            subject,
            decision,
            verdict,
            by,
            reason,
            choice.option_id or "cancelled",
        )
        if verdict is Verdict.ASK:
            self._pause("permission", request, subject, reason)
        chosen = None if self._cancelled else choice.option_id
        return self._permission_response(chosen), record

    def _permission_response(self, option_id: str | None) -> schema.RequestPermissionResponse:
        """The answer selecting `option_id` (None: ``cancelled``). Agents offer the
        same few option ids every time: each answer is built once (a few kept)."""
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
        """A governed read: resolved, inside the roots, not hidden. A small file
        whose read needs no approver and no fsync is answered at once."""
        self._check_session(req.session_id)
        path = self._resolved(req.path)
        decision = decide(ReadFile(path), self.policy)
        if path != req.path and decision.allowed:
            # A symlink's own name may be hidden even when its target is not.
            first = decide(ReadFile(os_normal(req.path)), self.policy)
            decision = first if not first.allowed else decision
        subject = {"path": req.path} | ({"resolved": path} if path != req.path else {})
        request = self._next_request()
        settled = self._settle_now("read", subject, path, decision)
        if settled is None or not self._answers_now():
            return self._read_later(req, path, subject, decision, request, settled)
        self._write_record("read", request, subject, decision, *settled)
        return self._read(req, path, settled)

    async def _read_later(
        self,
        req: schema.ReadTextFileRequest,
        path: str,
        subject: dict[str, Any],
        decision: Decision,
        request: int,
        settled: tuple[Verdict, str, str] | None,
    ) -> schema.ReadTextFileResponse:
        if settled is None:
            settled = await self._settle("read", subject, path, decision, {})
        await self._record("read", request, subject, decision, *settled)
        if settled[0] is Verdict.ASK:
            self._pause("read", request, subject, settled[2])
        answer = self._read(req, path, settled)
        if isinstance(answer, schema.ReadTextFileResponse):
            return answer
        return await cast(Awaitable[schema.ReadTextFileResponse], answer)

    def _read(
        self, req: schema.ReadTextFileRequest, path: str, settled: tuple[Verdict, str, str]
    ) -> schema.ReadTextFileResponse | Awaitable[schema.ReadTextFileResponse]:
        """The file's text once the read is allowed: a small file read here and now,
        a larger one in a worker thread (the answer then comes later)."""
        verdict, _, reason = settled
        if verdict is not Verdict.ALLOW:
            raise RpcError(REFUSED, f"Refused by the governor: {reason}")
        self.read_paths.add(os_normal(req.path))
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

    async def write_text_file(
        self, req: schema.WriteTextFileRequest
    ) -> schema.WriteTextFileResponse:
        """A governed write: capability, roots, protected paths; symlink-safe and atomic."""
        self._check_session(req.session_id)
        path = self._resolved(req.path)
        decision = decide(WriteFile(path), self.policy)
        if path != req.path and decision.allowed:
            first = decide(WriteFile(os_normal(req.path)), self.policy)
            decision = first if not first.allowed else decision
        subject = {"path": req.path, "bytes": len(req.content.encode())} | (
            {"resolved": path} if path != req.path else {}
        )
        request = self._next_request()
        verdict, by, reason = await self._settle(
            "write", subject, path, decision, {"content": req.content[:4000]}
        )
        await self._record("write", request, subject, decision, verdict, by, reason)
        if verdict is Verdict.ASK:
            self._pause("write", request, subject, reason)
        if verdict is not Verdict.ALLOW:
            raise RpcError(REFUSED, f"Refused by the governor: {reason}")
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

    # -- terminals ----------------------------------------------------------------------

    async def create_terminal(
        self, req: schema.CreateTerminalRequest
    ) -> schema.CreateTerminalResponse:
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
        request = self._next_request()
        verdict, by, reason = await self._settle("terminal", subject, shown, decision, {})
        await self._record("terminal", request, subject, decision, verdict, by, reason)
        if verdict is Verdict.ASK:
            self._pause("terminal", request, subject, reason)
        if verdict is not Verdict.ALLOW:
            raise RpcError(REFUSED, f"Refused by the governor: {reason}")
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
                    request=request,
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
        self._check_session(req.session_id)
        output, truncated, status = self._terminal(req.terminal_id, "output")
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
        self._check_session(req.session_id)
        self._terminal(req.terminal_id, "check")
        assert self.terminals is not None
        code, signal = await self.terminals.wait_for_exit(req.terminal_id)
        return schema.WaitForTerminalExitResponse(exit_code=code, signal=signal)

    async def kill_terminal(self, req: schema.KillTerminalRequest) -> schema.KillTerminalResponse:
        """Kill the command; the terminal stays valid for output and wait."""
        self._check_session(req.session_id)
        self._terminal(req.terminal_id, "check")
        assert self.terminals is not None
        await self.terminals.kill(req.terminal_id)
        return schema.KillTerminalResponse()

    async def release_terminal(
        self, req: schema.ReleaseTerminalRequest
    ) -> schema.ReleaseTerminalResponse:
        """Kill a still-running command and free its buffer; the id is then invalid."""
        self._check_session(req.session_id)
        self._terminal(req.terminal_id, "check")
        assert self.terminals is not None
        await self.terminals.release(req.terminal_id)
        return schema.ReleaseTerminalResponse()

    def _terminal(self, terminal_id: str, what: str) -> Any:
        assert self.terminals is not None
        try:
            if what == "output":
                return self.terminals.output(terminal_id)
            self.terminals.output(terminal_id)
            return None
        except LookupError:
            raise RpcError(RESOURCE_NOT_FOUND, f"unknown terminal {terminal_id[:64]!r}") from None

    # -- what the agent reports --------------------------------------------------------

    def observe_tool_call(self, update: Any) -> ToolCallState:
        """Upsert a ``tool_call`` / ``tool_call_update``; record unasked or reported work."""
        state = self._tool_call(update.tool_call_id)
        self._upsert(state, update)
        if state.status in ("completed", "failed") and not state.judged:
            state.judged = True
            if state.status == "completed" and not self._explained(state):
                self._report(state)
        return state

    def _explained(self, state: ToolCallState) -> bool:
        if state.governed:
            return True
        if any(t in self.governed_terminals for t in state.terminals):
            return True
        if state.locations:
            done = (
                self.written.keys() | self.read_paths
                if state.kind == "read"
                else self.written.keys()
            )
            return all(os_normal(p) in done for p in state.locations)
        return False

    def _report(self, state: ToolCallState) -> None:
        unasked = state.kind in UNASKED_KINDS
        subject: dict[str, Any] = {
            "tool_call": state.id,
            "title": state.title,
            "tool_kind": state.kind,
        }
        if state.locations:
            subject["paths"] = list(state.locations)
        raw = state.raw_input if isinstance(state.raw_input, Mapping) else {}
        if isinstance(raw.get("command"), str):
            subject["command"] = raw["command"]
        try:
            self.audit.record(
                "unasked" if unasked else "reported",
                session=self.session_id,
                subject=subject,
                verdict="reported",
                by="agent",
                reason=(
                    f"the agent reports a completed {state.kind} tool call that never came through the governor"
                    if unasked
                    else f"the agent reports a completed {state.kind or 'other'} tool call"
                ),
            )
        except AuditUnavailable as e:
            self._fail(str(e))
        self.on_event("unasked" if unasked else "reported", {"subject": subject})

    def _tool_call(self, tool_call_id: str) -> ToolCallState:
        """The state of a tool call, made at its first mention (not at every one)."""
        state = self.tool_calls.get(tool_call_id)
        if state is None:
            state = self.tool_calls[tool_call_id] = ToolCallState(tool_call_id)
        return state

    @staticmethod
    def _upsert(
        state: ToolCallState,
        update: schema.ToolCallStart | schema.ToolCallProgress | schema.ToolCallUpdate,
    ) -> None:
        if update.title:
            state.title = update.title
        if update.kind:
            state.kind = update.kind
        if update.status:
            state.status = update.status
        raw = update.raw_input
        if raw is not None and raw != {}:
            state.raw_input = raw
        locations = update.locations
        if locations is not None:
            state.locations = tuple(loc.path for loc in locations)
        content = update.content
        if content is not None:
            state.terminals = tuple(
                c.terminal_id for c in content if getattr(c, "type", None) == "terminal"
            )

    async def _ask_approver(self, ask: Ask) -> Answer | None:
        """The approver's answer, or None when the turn is cancelled first: after
        ``session/cancel`` every pending ask must be answered cancelled."""
        answer: Answer | None = None
        async with trio.open_nursery() as nursery:

            async def approve() -> None:
                nonlocal answer
                answer = await self.approver(ask)
                nursery.cancel_scope.cancel()

            async def cancelled() -> None:
                await self._cancel_event.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(approve)
            nursery.start_soon(cancelled)
        return answer

    def cancel(self) -> None:
        """After ``session/cancel``: pending and later asks are answered cancelled."""
        self._cancelled = True
        self._cancel_event.set()


INLINE_READ_BYTES: Final = 256 * 1024
"""Files up to this size are read on the trio thread; larger ones in a worker."""


def os_normal(path: str) -> str:
    """A lexically normalized absolute path (no symlinks resolved)."""
    return normalize(path)
