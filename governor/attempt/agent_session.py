"""An ACP agent's steps: spawn it, initialize, open (or go on with) a session, prompt, end the turn.

initialize (protocol 1, fs + terminal) -> session/new (cwd, extra dirs, the
relayed MCP servers), or a paused attempt's session resumed or loaded ->
the asking mode (`governor.attempt.session_setup`) -> session/prompt, whose
updates the turn folds; at the end of the turn, a timeout or a pause:
session/cancel, pending asks answered cancelled, grace, then the shutdown
(`governor.attempt.under_way`). What the agent said is recorded in the
`Ending`, never judged here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

import structlog
import trio
from pydantic import ValidationError

from governor.acp.connection import Connection, ConnectionClosed, RemoteError, RequestTimeout
from governor.acp.jsonrpc import AUTH_REQUIRED, short_error
from governor.acp.models import schema
from governor.agents import npm_installs as installs
from governor.attempt.session_setup import SessionSetup
from governor.attempt.under_way import UnderWay
from governor.confine import model_api
from governor.confine import sandboxes as confine
from governor.gate import elicitation
from governor.gate.model_calls import strength
from governor.gate.ruling import REFUSED
from governor.job.spec import PlainProgram
from governor.mcp import relay as mcp
from governor.policies.policy import Policy

PROTOCOL_VERSION: Final = 1

INIT_TIMEOUT: Final = 120.0

SESSION_TIMEOUT: Final = 120.0

CANCEL_GRACE: Final = 5.0

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


class AgentSession(UnderWay):
    """The steps of an ACP agent: its process, its connection, its session and its turn."""

    async def _drive(self) -> None:
        p = self.prepared
        gate = self.gate
        assert gate is not None
        try:
            await self._fetch_for_npx()
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
                    self._connection_ended(conn.gave_up, conn.stderr_tail)
            self._blame_limit(process.returncode, "\n".join(self.end.stderr_tail))
            if self.end.error is not None:
                self._folders_unseen(
                    await trio.to_thread.run_sync(confine.unseen_folders, profile)
                )
        except (OSError, confine.SandboxUnavailable, installs.InstallError) as e:
            self._failed(
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
            self._failed(f"{self.name} did not initialize: {short_error(e)}")
            return
        if init_model.agent_info and init_model.agent_info.name:
            self.name = init_model.agent_info.title or init_model.agent_info.name
        if init_model.protocol_version != PROTOCOL_VERSION:
            self._failed(
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
                self._failed(f"{self.name} could not start a session: {short_error(e)}")
            return
        except (ConnectionClosed, RequestTimeout, ValidationError) as e:
            self._failed(f"{self.name} could not start a session: {short_error(e)}")
            return
        self.turn.session_id = gate.session_id = session.session_id
        structlog.contextvars.bind_contextvars(session=session.session_id)
        setup = await SessionSetup(conn, self.prepared, self.name, self.audit).run(
            session, raw.get("models")
        )
        self.turn.notices.extend(setup.notices)
        if setup.error is not None:
            self._failed(setup.error)
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
                self._failed(f"{self.name} answered the prompt with an error: {short_error(e)}")
        except (ConnectionClosed, ValidationError) as e:
            self._failed(f"{self.name} ended without an answer: {short_error(e)}")
        finally:
            self.turn_over.set()

    def _on_notification(self, method: str, params: Any) -> None:
        if method == "session/update" and not self.replaying:
            self.turn.feed(params)

    async def _watch_pause(self, conn: Connection) -> None:
        gate = self.gate
        assert gate is not None
        await gate.pause_requested.wait()
        await self._cancel_turn(conn)
        await self._await_turn(CANCEL_GRACE)

    # -- the turn's part of the `Ending`: written here only ----------------------------

    def _turn_said(self) -> None:
        """What the turn said, at the attempt's end: the agent's final message,
        mode, title, config options and plan, the usage it reported (with what
        the proxy saw of its model calls), and the attempt's notices."""
        end, turn = self.end, self.turn
        end.final_message = turn.final_message
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


def _version() -> str:
    from governor.version import __version__

    return __version__
