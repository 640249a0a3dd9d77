"""``terminal/*``: a command decided before it starts, then relayed.

Rules of this file:

- **A refused command never starts**: ``terminal/create`` is governed once
  (`governor.gate.gatekeeper.Gate.govern`), and only an allowed command reaches the
  sandbox (`governor.confine.sandboxes.GovernedTerminals`).
- **Never bare**: a command whose sandbox cannot start (bwrap gone or broken)
  is refused, the ruling overruled in the log under the same request, and the
  gate fails closed.
- **Only what it started**: output, wait, kill and release answer for a
  terminal of the attempt's session, looked up (never rendered) to learn that
  it exists; any other id is ``-32002``.
- Each started terminal's id is evidence (`governor.ending.attribution.Carried`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import shlex
from collections.abc import Awaitable, Callable
from typing import Any, cast

from governor.acp.dispatch import Route, RpcError
from governor.acp.jsonrpc import INVALID_PARAMS, RESOURCE_NOT_FOUND
from governor.acp.models import schema
from governor.audit import effects
from governor.audit.log import AuditUnavailable
from governor.confine.sandboxes import GovernedTerminals
from governor.gate.handler_seam import Governs
from governor.gate.ruling import REFUSED, Ruling, then
from governor.policies import by as who
from governor.policies.actions import RunCommand
from governor.policies.decide import Decision, decide
from governor.policies.rules import Verdict
from governor.sandbox import BwrapUnavailable, ProfileError
from governor.sandbox.run.execution import Execution


def what_runs(req: schema.CreateTerminalRequest, mask: Callable[[str], str]) -> dict[str, Any]:
    """What else changes what a command does, beyond its command line and cwd (the
    subject): its environment's values and its output's limit. In the request's
    key (`governor.gate.approver.request_key`), so a decision on one command is
    never one on the same line with other values (``BASH_ENV``, ``PYTHONPATH``,
    what the command reads); the values go in as a digest, never into a record,
    and are shown masked to the person who decides (``env``)."""
    detail: dict[str, Any] = {}
    pairs = [[e.name, e.value] for e in (req.env or [])]
    if pairs:
        whole = json.dumps(pairs, ensure_ascii=False).encode("utf-8", "surrogatepass")
        detail["env_digest"] = hashlib.sha256(whole).hexdigest()
        detail["env"] = [f"{name}={mask(value)}" for name, value in pairs]
    if req.output_byte_limit is not None:
        detail["output_byte_limit"] = req.output_byte_limit
    return detail


class TerminalRelay:
    """The agent's terminals, decided by one gate and run in the attempt's sandbox."""

    def __init__(self, gate: Governs, terminals: GovernedTerminals) -> None:
        self.gate = gate
        self.terminals = terminals

    def routes(self) -> dict[str, Route]:
        """The terminal methods' entries in the gate's handler table."""
        return {
            "terminal/create": Route(schema.CreateTerminalRequest, self.create_terminal),
            "terminal/output": Route(schema.TerminalOutputRequest, self.terminal_output),
            "terminal/wait_for_exit": Route(
                schema.WaitForTerminalExitRequest, self.wait_for_terminal_exit
            ),
            "terminal/kill": Route(schema.KillTerminalRequest, self.kill_terminal),
            "terminal/release": Route(schema.ReleaseTerminalRequest, self.release_terminal),
        }

    def create_terminal(
        self, req: schema.CreateTerminalRequest, *, via: str | None = None
    ) -> Awaitable[schema.CreateTerminalResponse]:
        """Decide the command first; a refused command never starts. ``via`` names
        the way it came when not ACP (``mcp:governor``: `governor.mcp.own_tools`),
        in its record's subject."""
        gate = self.gate
        gate.check_session(req.session_id)
        args = list(req.args or [])
        # As the sandbox runs it: no args means a shell line (claude-code-acp sends
        # whole lines in `command`), args mean `command` is the program.
        command: str | tuple[str, ...] = (req.command, *args) if args else req.command
        cwd = req.cwd or gate.policy.workspace
        if not cwd.startswith("/"):
            raise RpcError(INVALID_PARAMS, "Invalid params: cwd: must be an absolute path")
        env_names = tuple(e.name for e in (req.env or []))
        decision = decide(RunCommand(command, cwd, env_names), gate.policy)
        shown = command if isinstance(command, str) else shlex.join(command)
        subject = {"command": shown, "cwd": cwd} | ({"env": list(env_names)} if env_names else {})
        if not isinstance(command, str):
            subject["argv"] = list(command)  # an argv is judged without a shell: replay needs it
        if via is not None:
            subject["via"] = via
        ruling = gate.govern("terminal", subject, shown, decision, what_runs(req, gate.audit.masker.text))
        return cast(
            Awaitable[schema.CreateTerminalResponse],
            then(ruling, lambda r: self._start(req, args, cwd, subject, shown, r)),
        )

    async def _start(
        self,
        req: schema.CreateTerminalRequest,
        args: list[str],
        cwd: str,
        subject: dict[str, Any],
        shown: str,
        ruling: Ruling,
    ) -> schema.CreateTerminalResponse:
        if not ruling.allowed:
            raise RpcError(REFUSED, f"Refused by the governor: {ruling.reason}")
        gate = self.gate
        env = {e.name: e.value for e in (req.env or [])}
        try:
            terminal_id: str = await self.terminals.create(
                req.command, args, env=env, cwd=cwd, output_byte_limit=req.output_byte_limit,
                on_exit=functools.partial(self._exited, subject, ruling.seq),
            )  # fmt: skip
        except ProfileError as e:
            raise RpcError(INVALID_PARAMS, f"Invalid params: {e}") from None
        except (BwrapUnavailable, OSError) as e:
            # The command could not start in its sandbox (bwrap gone, broken): it never
            # runs bare. The gate fails closed first (nothing more is allowed while the
            # record is written), then the log says so next to the allow.
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            gate.fail(f"the sandbox stopped working: {why}")
            unable = Decision(
                Verdict.DENY, "sandbox: unavailable", f"not started: {gate.failure}", by=who.FAILED
            )
            with contextlib.suppress(RpcError):  # a log that broke too: refused all the same
                await gate.ruled("terminal", subject, shown, unable, {}, overrules=ruling)
            raise RpcError(REFUSED, f"Refused by the governor: {gate.failure}") from None
        gate.carried.terminals.add(terminal_id)
        return schema.CreateTerminalResponse(terminal_id=terminal_id)

    async def terminal_output(
        self, req: schema.TerminalOutputRequest
    ) -> schema.TerminalOutputResponse:
        """The output so far (newest bytes), truncation flag, exit status once exited."""
        self._check(req.session_id, req.terminal_id)
        output, truncated, status = self.terminals.output(req.terminal_id)
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
        self._check(req.session_id, req.terminal_id)
        code, signal = await self.terminals.wait_for_exit(req.terminal_id)
        return schema.WaitForTerminalExitResponse(exit_code=code, signal=signal)

    async def kill_terminal(self, req: schema.KillTerminalRequest) -> schema.KillTerminalResponse:
        """Kill the command; the terminal stays valid for output and wait."""
        self._check(req.session_id, req.terminal_id)
        await self.terminals.kill(req.terminal_id)
        return schema.KillTerminalResponse()

    async def release_terminal(
        self, req: schema.ReleaseTerminalRequest
    ) -> schema.ReleaseTerminalResponse:
        """Kill a still-running command and free its buffer; the id is then invalid."""
        self._check(req.session_id, req.terminal_id)
        await self.terminals.release(req.terminal_id)
        return schema.ReleaseTerminalResponse()

    def _exited(self, subject: dict[str, Any], decision: int | None, execution: Execution) -> None:
        """The command ended: its ``exit`` record (how, and its output's newest
        lines, masked and bounded: `governor.audit.effects`), for the auditor's page.
        Written after the fact, off the decision path; a log that cannot take
        it (full, broken) has refused everything since already."""
        status = execution.status
        output, _ = execution.ring.text(final=True)
        audit = self.gate.audit
        with contextlib.suppress(AuditUnavailable):
            audit.append(
                "exit",
                effects.exit_fields(
                    {k: subject[k] for k in ("command", "cwd") if k in subject},
                    decision,
                    None if status is None else status.exit_code,
                    None if status is None else status.signal,
                    output,
                    audit.masker,
                ),
                thin=False,
            )

    def _check(self, session_id: str, terminal_id: str) -> None:
        """Refuse a request for another session, or for a terminal it does not hold."""
        self.gate.check_session(session_id)
        if not self.terminals.knows(terminal_id):
            raise RpcError(RESOURCE_NOT_FOUND, f"unknown terminal {terminal_id[:64]!r}")
