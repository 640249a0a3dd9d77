"""One governed attempt: spawn the agent, drive one ACP turn, end with an honest outcome.

The lifecycle, each step owned by one nursery that nothing outlives:

  checks (ceiling, env names, workspace, agent installed, sandbox) -- refuse before start
  -> audit attempt-start -> spawn (inside the agent sandbox by default)
  -> initialize (protocol 1, fs + terminal) -> session/new (cwd, extra dirs, no MCP)
  -> pick the mode in which the agent asks -> session/prompt, streaming session/update
  -> end of turn, timeout or pause: session/cancel, pending asks answered cancelled,
     grace, close stdin, SIGTERM, SIGKILL of the agent's whole tree
  -> workspace diff (unasked changes) -> outcome -> audit attempt-end.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import signal
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import structlog
import trio
from acp import schema
from pydantic import ValidationError

from governor import confine
from governor.acp.connection import Connection, ConnectionClosed, RemoteError, RequestTimeout
from governor.acp.jsonrpc import AUTH_REQUIRED
from governor.approver import Approver, Ask, Callback, for_on_ask
from governor.audit.log import AuditLog, AuditUnavailable, Durability, inside
from governor.ceilings import load_ceiling
from governor.gate import REFUSED, Gate
from governor.outcome import AcpReport, Judgement, Outcome, from_stop_reason, judged
from governor.presets import NotInstalled, Preset, find, resolve
from governor.secrets import Masker
from governor.workspace import diff, snapshot, unexplained
from policies.capability import Capability
from policies.ceiling import CUSTOM_AGENT, CUSTOM_COMMAND, Ceiling, RunRequest, check, parse_ceiling
from policies.policy import Policy, parse_policy

log = structlog.get_logger("governor.attempt")

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


class RefusedBeforeStart(Exception):
    """Nothing was started: every problem found, one per line (exit code 2)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass
class AttemptSpec:
    """Everything one attempt needs; mirrors `governor run`.

    The agent is a preset id (``agent``) or an ACP program (``argv``), never both.
    Least authority by default: the policy's capability (read-only when no
    policy), the agent sandboxed, unattended approvals.
    """

    prompt: str
    agent: str | None = None
    argv: Sequence[str] | None = None
    workspace: str | Path = "."
    extra_dirs: Sequence[str | Path] = ()
    policy: Policy | str | Path | None = None
    capability: Capability | str | None = None
    ceiling: Ceiling | str | Path | None = None
    approver: Approver | Callable[[Ask], Any] | None = None
    timeout: float = 1800.0
    log: str | Path | None = None
    sandbox_agent: bool = True
    env: Sequence[str] = ()
    model: str | None = None
    mode: str | None = None
    agent_args: Sequence[str] = ()
    append_rules: bool = False
    durability: Durability = "batch"
    on_event: Callable[[str, dict[str, Any]], None] | None = None
    max_line_bytes: int = 32 * 2**20
    environ: Mapping[str, str] | None = None
    """The environment the agent's variables come from (default: ``os.environ``)."""
    kind: Literal["acp", "command"] = "acp"
    """``command``: a plain program, not ACP: the prompt on its stdin, judged from its
    exit status, its last stdout line and the workspace diff."""


@dataclass
class _Prepared:
    spec: AttemptSpec
    policy: Policy
    ceiling: Ceiling
    preset: Preset | None
    agent_id: str
    argv: list[str]
    env: dict[str, str]
    masker: Masker
    log_path: Path | None
    approver: Approver
    via_npx: bool = False


# -- before start ----------------------------------------------------------------------


def prepare(spec: AttemptSpec) -> _Prepared:
    """Every check that must pass before anything starts; all problems at once."""
    problems: list[str] = []
    environ = dict(os.environ if spec.environ is None else spec.environ)
    if (spec.agent is None) == (spec.argv is None or not list(spec.argv)):
        raise RefusedBeforeStart(
            ["say which agent: a preset (--agent ID) or an ACP command (after --), not both"]
        )
    policy = _load_policy(spec.policy)
    if spec.capability is not None:
        cap = (
            spec.capability
            if isinstance(spec.capability, Capability)
            else Capability.parse(spec.capability)
        )
        policy = _with_capability(policy, cap)
    ceiling = _load_ceiling(spec.ceiling)
    agent_id = spec.agent or (CUSTOM_COMMAND if spec.kind == "command" else CUSTOM_AGENT)
    request = RunRequest(agent_id, policy.capability, tuple(spec.agent_args), policy.network)
    verdict = check(request, ceiling)
    if isinstance(verdict, list):
        problems.extend(f"refused by the ceiling ({ceiling.source}): {v}" for v in verdict)
    missing = [n for n in [*spec.env, *policy.env] if not environ.get(n)]
    if missing:
        problems.append(
            f"required environment variables are unset or empty: {', '.join(dict.fromkeys(missing))}"
        )
    workspace = Path(spec.workspace).expanduser()
    if not workspace.is_dir():
        problems.append(f"the workspace does not exist or is not a directory: {workspace}")
    extra = []
    for d in spec.extra_dirs:
        p = Path(d).expanduser()
        if not p.is_dir():
            problems.append(f"an extra directory does not exist or is not a directory: {p}")
        extra.append(str(p.resolve()))
    preset: Preset | None = None
    argv: list[str] = []
    via_npx = False
    if spec.agent is not None:
        try:
            preset = find(spec.agent)
        except Exception as e:  # PresetError: unknown id, with the known ones
            problems.append(str(e))
        else:
            found = resolve(preset)
            if isinstance(found, NotInstalled):
                problems.append(found.message)
            else:
                argv = [*found.argv, *spec.agent_args]
                via_npx = found.via_npx
    else:
        argv = [*(spec.argv or []), *spec.agent_args]
        if argv and "/" not in argv[0] and not _which(argv[0], environ):
            problems.append(f"the agent command {argv[0]!r} is not on PATH")
    if problems:
        raise RefusedBeforeStart(problems)
    ws = str(workspace.resolve())
    bound = policy.bind(ws, tuple(extra) if spec.extra_dirs else None, protected=ceiling.protected)
    if not spec.extra_dirs:
        missing_dirs = [r for r in bound.roots[1:] if not os.path.isdir(r)]
        if missing_dirs:
            raise RefusedBeforeStart(
                [f"an extra directory of the policy does not exist: {d}" for d in missing_dirs]
            )
    log_path = _log_path(spec, ws)
    if log_path is not None and (root := inside(log_path, bound.roots)) is not None:
        raise RefusedBeforeStart(
            [
                f"the audit log {log_path} is inside the root {root}, where the agent could "
                "rewrite it: give --log (or $XDG_STATE_HOME) a place outside every root"
            ]
        )
    env = _agent_env(environ, preset, [*spec.env, *policy.env])
    masker = Masker.from_environ(environ, spec.agent_args)
    approver = _approver(spec.approver, bound)
    return _Prepared(
        spec,
        bound,
        ceiling,
        preset,
        agent_id,
        argv,
        env,
        masker,
        log_path,
        approver,
        via_npx,
    )


def _load_policy(value: Policy | str | Path | None) -> Policy:
    if value is None or isinstance(value, Policy):
        return value or Policy()
    path = Path(value)
    try:
        return parse_policy(path.read_text(encoding="utf-8"), str(path))
    except OSError as e:
        raise RefusedBeforeStart([f"{path}: cannot read the policy: {e.strerror}"]) from None
    except ValueError as e:
        raise RefusedBeforeStart([str(e)]) from None


def _load_ceiling(value: Ceiling | str | Path | None) -> Ceiling:
    if isinstance(value, Ceiling):
        return value
    try:
        if value is None:
            return load_ceiling(None)
        path = Path(value)
        return parse_ceiling(path.read_text(encoding="utf-8"), f"{path} (--ceiling)")
    except OSError as e:
        raise RefusedBeforeStart([f"{value}: cannot read the ceiling: {e.strerror}"]) from None
    except ValueError as e:
        raise RefusedBeforeStart([str(e)]) from None


def _with_capability(policy: Policy, cap: Capability) -> Policy:
    from dataclasses import replace

    return replace(policy, capability=cap)


def _which(name: str, environ: Mapping[str, str]) -> str | None:
    import shutil

    return shutil.which(name, path=environ.get("PATH"))


BASE_ENV: Final = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TERM",
    "USER",
    "LOGNAME",
    "SHELL",
    "TZ",
    "TMPDIR",
)


def _agent_env(
    environ: Mapping[str, str], preset: Preset | None, names: Sequence[str]
) -> dict[str, str]:
    """The agent's environment: the basics, its preset's credential and relocation
    variables that are set, and the names the job declared. Nothing else of ours."""
    keep = list(BASE_ENV) + list(names)
    if preset is not None:
        keep += list(preset.env) + [r.var for r in preset.relocate]
    env = {k: environ[k] for k in dict.fromkeys(keep) if environ.get(k)}
    if environ.get("IS_SANDBOX") == "yes":
        env["IS_SANDBOX"] = "1"  # "yes" makes Claude's adapters fail session/new as root
    return env


def _approver(value: Approver | Callable[[Ask], Any] | None, policy: Policy) -> Approver:
    if value is None:
        return for_on_ask(policy.on_ask)
    if hasattr(value, "name") and callable(value):
        return value  # type: ignore[return-value]
    return Callback(value)


def default_log_dir() -> Path:
    """Where per-attempt audit logs go: ``$XDG_STATE_HOME/acp-governor/``."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "acp-governor"


def _log_path(spec: AttemptSpec, workspace: str) -> Path | None:
    if spec.log is not None:
        return Path(spec.log).expanduser().resolve()
    stamp = time.strftime("%Y%m%dT%H%M%S")
    name = f"{Path(workspace).name or 'root'}-{stamp}-{uuid.uuid4().hex[:6]}.jsonl"
    return default_log_dir() / name


# -- the attempt ------------------------------------------------------------------------


@dataclass
class _Turn:
    """What the agent reported during the turn (folded from session/update)."""

    message: list[str] = field(default_factory=list)
    message_id: str | None = None
    plan_update: Any = None
    """The last ``plan`` update (a full snapshot), kept as its model."""
    usage_merged: dict[str, Any] | None = None
    """The usage reports folded so far, but for `usage_last`."""
    usage_last: Any = None
    """The last usage report, kept as its model (see `add_usage`)."""
    mode_id: str | None = None
    notices: list[str] = field(default_factory=list)
    unknown_updates: int = 0
    bad_updates: int = 0

    def add_usage(self, report: Any) -> None:
        """Fold a usage report (a schema model): later values win, fields a report
        leaves out keep the earlier values.

        Dumping a model costs more than the rest of a notification, and a chatty
        agent reports usage often: the last report is kept as its model, and dumped
        when `usage` is read or when a newer report does not set every field it set.
        """
        last = self.usage_last
        if last is not None and not all(
            getattr(report, name, None) is not None for name in last.model_fields_set
        ):
            self.usage_merged = self.usage
        self.usage_last = report

    @property
    def usage(self) -> dict[str, Any] | None:
        """Every usage report folded, as JSON values (None when there was none)."""
        if self.usage_last is None:
            return self.usage_merged
        last = self.usage_last.model_dump(
            by_alias=True, exclude_none=True, exclude={"session_update"}
        )
        return {**(self.usage_merged or {}), **last}

    @property
    def plan(self) -> list[dict[str, Any]]:
        """The agent's last plan, as JSON values."""
        if self.plan_update is None:
            return []
        return [e.model_dump(by_alias=True, exclude_none=True) for e in self.plan_update.entries]


_heap_frozen = False


def _freeze_startup_heap() -> None:
    """Once per process, before its first attempt: collect, then move every object
    alive (modules, the schema's models and validators: some 70,000 objects) out
    of the garbage collector's sight (`gc.freeze`).

    A chatty agent makes the collector run full collections every few hundred
    thousand allocations, and each walked that whole startup heap again (about
    20 ms here): a tenth of the governor's time on a stream of notifications.
    Reference counting still frees frozen objects; only reference cycles among
    them, which startup objects do not form, would stay.
    """
    global _heap_frozen
    if not _heap_frozen:
        _heap_frozen = True
        gc.collect()
        gc.freeze()


async def run_attempt(spec: AttemptSpec, *, stop: trio.Event | None = None) -> Outcome:
    """Run one governed attempt under trio. Raises `RefusedBeforeStart` when a check
    fails before anything starts (an audit log that cannot be written included);
    every other ending is an `Outcome`.

    Setting `stop` ends the attempt early the way a timeout does -- the turn is
    cancelled, the agent shut down, the outcome ``failed`` and the log complete;
    `governor run` sets it on SIGINT and SIGTERM."""
    _freeze_startup_heap()
    prepared = prepare(spec)
    try:
        await confine.check(prepared.policy, sandbox_agent=spec.sandbox_agent)
    except confine.SandboxUnavailable as e:
        raise RefusedBeforeStart([str(e)]) from None
    try:
        attempt = _Attempt(prepared, stop)
    except AuditUnavailable as e:
        raise RefusedBeforeStart([f"{e}; nothing was started"]) from None
    # Operational logs carry the attempt; the session joins once the agent opens
    # one (bound in this same task, so unbound here afterwards: ... is "unset").
    ids = {"attempt": attempt.id, "agent": prepared.agent_id, "session": ...}
    with structlog.contextvars.bound_contextvars(**ids):
        return await attempt.run()


def run(spec: AttemptSpec) -> Outcome:
    """`run_attempt` from synchronous code."""
    return trio.run(run_attempt, spec)


class _Attempt:
    def __init__(self, p: _Prepared, stop: trio.Event | None = None) -> None:
        self.p = p
        self.stop = stop
        self.interrupted = False
        self.deadline: trio.CancelScope | None = None
        self.id = f"{p.agent_id}-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        self.name = p.preset.name if p.preset else (Path(p.argv[0]).name if p.argv else p.agent_id)
        self.turn = _Turn()
        self.emit = p.spec.on_event or (lambda kind, info: None)
        self.audit = AuditLog(p.log_path, self.id, durability=p.spec.durability, masker=p.masker)
        self.governor: Gate | None = None
        self.stop_reason: str | None = None
        self.error: str | None = None
        self.sign_in: str | None = None
        self.prompted = False
        self.timed_out = False
        self.mode: dict[str, Any] | None = None
        self.started = time.monotonic()
        self.session_id: str | None = None
        self.turn_over = trio.Event()
        """Set when the prompt is answered (or when the governor stops waiting for it)."""

    async def run(self) -> Outcome:
        p = self.p
        policy = p.policy
        try:
            start = self.audit.record(
                "attempt-start",
                agent=p.agent_id,
                preset=p.preset.id if p.preset else None,
                argv=_redacted_argv(p.argv, len(p.spec.agent_args)),
                capability=str(policy.capability),
                workspace=policy.workspace,
                roots=list(policy.roots),
                policy=_digest(repr(policy)),
                policy_source=policy.source,
                ceiling=_digest(repr(p.ceiling)),
                ceiling_source=p.ceiling.source,
                protected=list(p.ceiling.protected) or None,
                sandboxed_agent=p.spec.sandbox_agent and policy.capability < Capability.FULL_ACCESS,
                approvals=p.approver.name,
            )
            await self.audit.durable(start)
        except AuditUnavailable as e:
            self.audit.close()
            raise RefusedBeforeStart([f"{e}; nothing was started"]) from None
        before = await trio.to_thread.run_sync(snapshot, policy.roots)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.audit.run_batch_sync)
                if self.stop is not None:
                    nursery.start_soon(self._watch_stop, self.stop)
                terminals = confine.GovernedTerminals(nursery, policy)
                self.governor = Gate(
                    policy, self.audit, p.approver, terminals=terminals, on_event=p.spec.on_event
                )
                try:
                    if p.spec.kind == "command":
                        await self._drive_command()
                    else:
                        await self._drive(nursery)
                finally:
                    await terminals.close()
                nursery.cancel_scope.cancel()
        except AuditUnavailable as e:
            self.error = str(e)
        after = await trio.to_thread.run_sync(snapshot, policy.roots)
        self._unasked_changes(before, after)
        outcome = self._outcome()
        with contextlib.suppress(AuditUnavailable):
            self.audit.record(
                "attempt-end",
                status=outcome.status,
                reason=outcome.reason,
                tally=asdict(outcome.acp.tally) if outcome.acp else None,
                duration_s=outcome.duration_s,
            )
        self.audit.close()
        return outcome

    async def _drive(self, nursery: trio.Nursery) -> None:
        p = self.p
        gov = self.governor
        assert gov is not None
        try:
            profile = confine.agent_profile(
                p.argv, p.policy, p.preset, p.env, sandbox=p.spec.sandbox_agent, via_npx=p.via_npx
            )
            async with confine.spawn_agent(profile, p.argv) as process:
                self.emit(
                    "spawned",
                    {
                        "agent": self.name,
                        "pid": process.pid,
                        "argv": _redacted_argv(p.argv, len(p.spec.agent_args)),
                    },
                )
                assert process.stdin is not None and process.stdout is not None
                conn = Connection(
                    process.stdin,
                    process.stdout,
                    process.stderr,
                    max_line_bytes=p.spec.max_line_bytes,
                )
                self.conn = conn
                async with trio.open_nursery() as inner:
                    await inner.start(conn.serve, gov.routes(), self._on_notification)
                    with self._deadline() as deadline:
                        await self._session(conn, inner)
                    if deadline.cancelled_caught:
                        self._timed_out_or_interrupted()
                        await self._cancel_turn(conn)
                        await self._await_turn(CANCEL_GRACE)
                    gov.cancel()  # the turn is over: later requests are refused, never acted on
                    await self._shutdown(process, conn)
                    inner.cancel_scope.cancel()
        except (OSError, confine.SandboxUnavailable) as e:
            self.error = f"{self.name} could not be started: {getattr(e, 'strerror', None) or e}"

    async def _drive_command(self) -> None:
        """A plain program: prompt on stdin, stdout kept (newest 1 MiB), stderr tail."""
        p = self.p
        stdout = bytearray()
        stderr = bytearray()
        limit = 2**20
        try:
            profile = confine.agent_profile(
                p.argv, p.policy, p.preset, p.env, sandbox=p.spec.sandbox_agent
            )
            async with confine.spawn_agent(profile, p.argv) as process:
                self.emit("spawned", {"agent": self.name, "pid": process.pid})
                await self._feed_command(process, stdout, stderr, limit)
        except (OSError, confine.SandboxUnavailable) as e:
            self.error = f"{self.name} could not be started: {getattr(e, 'strerror', None) or e}"
            return
        out = stdout.decode("utf-8", errors="replace")
        self.command_result = (process.returncode, out, stderr.decode("utf-8", errors="replace"))

    async def _feed_command(
        self, process: Any, stdout: bytearray, stderr: bytearray, limit: int
    ) -> None:
        p = self.p

        async def feed() -> None:
            assert process.stdin is not None
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await process.stdin.send_all(p.spec.prompt.encode())
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await process.stdin.aclose()

        async def drain(stream: Any, into: bytearray) -> None:
            while chunk := await stream.receive_some(65536):
                into.extend(chunk)
                if len(into) > limit:
                    del into[: len(into) - limit]

        with self._deadline() as deadline:
            async with trio.open_nursery() as n:
                n.start_soon(feed)
                n.start_soon(drain, process.stdout, stdout)
                n.start_soon(drain, process.stderr, stderr)
            await process.wait()
        if deadline.cancelled_caught:
            self._timed_out_or_interrupted()
            await _terminate(process)

    def _deadline(self) -> trio.CancelScope:
        """The scope of the turn: it ends at the timeout, or when `stop` is set."""
        self.deadline = trio.move_on_after(self.p.spec.timeout)
        if self.stop is not None and self.stop.is_set():
            self.deadline.cancel()
        return self.deadline

    def _timed_out_or_interrupted(self) -> None:
        self.interrupted = self.stop is not None and self.stop.is_set()
        self.timed_out = not self.interrupted

    async def _watch_stop(self, stop: trio.Event) -> None:
        await stop.wait()
        if self.deadline is not None:
            self.deadline.cancel()

    async def _session(self, conn: Connection, nursery: trio.Nursery) -> None:
        p = self.p
        gov = self.governor
        assert gov is not None
        try:
            init = await conn.request(
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "clientCapabilities": {
                        "fs": {"readTextFile": True, "writeTextFile": True},
                        "terminal": True,
                    },
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
            self.error = f"{self.name} did not initialize: {_short_error(e)}"
            return
        if init_model.agent_info and init_model.agent_info.name:
            self.name = init_model.agent_info.title or init_model.agent_info.name
        if init_model.protocol_version != PROTOCOL_VERSION:
            self.error = (
                f"{self.name} speaks ACP protocol version {init_model.protocol_version}; "
                f"the governor speaks {PROTOCOL_VERSION}"
            )
            return
        self.auth_methods = init_model.auth_methods or []
        caps = init_model.agent_capabilities
        new_params: dict[str, Any] = {"cwd": p.policy.workspace, "mcpServers": []}
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
        try:
            session = schema.NewSessionResponse.model_validate(
                await conn.request("session/new", new_params, timeout=SESSION_TIMEOUT)
            )
        except RemoteError as e:
            if e.code == AUTH_REQUIRED:
                self.sign_in = self._login_line()
                self.error = f"{self.name} needs signing in: {self.sign_in}"
            else:
                self.error = f"{self.name} could not start a session: {_short_error(e)}"
            return
        except (ConnectionClosed, RequestTimeout, ValidationError) as e:
            self.error = f"{self.name} could not start a session: {_short_error(e)}"
            return
        self.session_id = gov.session_id = session.session_id
        structlog.contextvars.bind_contextvars(session=session.session_id)
        await self._pick_mode(conn, session)
        prompt = p.spec.prompt + (RULES_FOR_THE_AGENT if p.spec.append_rules else "")
        self.prompted = True
        self.emit("prompt", {"session": session.session_id})
        # The prompt runs in the connection's nursery, outside the deadline: after a
        # timeout or a pause the agent still gets to answer it `cancelled` (and to
        # receive our `cancelled` answers) before its stdin is closed.
        nursery.start_soon(self._prompt, conn, session.session_id, prompt)
        nursery.start_soon(self._watch_pause, conn)
        await self.turn_over.wait()

    async def _prompt(self, conn: Connection, session_id: str, prompt: str) -> None:
        try:
            result = await conn.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": prompt}]},
                then_refuse=(REFUSED, "Refused by the governor: the turn is over"),
            )
            response = schema.PromptResponse.model_validate(result)
            self.stop_reason = response.stop_reason
            if response.usage is not None:
                self.turn.add_usage(response.usage)
        except RemoteError as e:
            if e.code == AUTH_REQUIRED:
                self.sign_in = self._login_line()
                self.error = f"{self.name} needs signing in: {self.sign_in}"
            else:
                self.error = f"{self.name} answered the prompt with an error: {_short_error(e)}"
        except (ConnectionClosed, ValidationError) as e:
            self.error = f"{self.name} ended without an answer: {_short_error(e)}"
        finally:
            self.turn_over.set()

    async def _watch_pause(self, conn: Connection) -> None:
        gov = self.governor
        assert gov is not None
        await gov.pause_requested.wait()
        await self._cancel_turn(conn)
        await self._await_turn(CANCEL_GRACE)

    async def _await_turn(self, grace: float) -> None:
        """Wait up to `grace` for the agent to answer the prompt, then stop waiting."""
        with trio.move_on_after(grace):
            await self.turn_over.wait()
        self.turn_over.set()

    async def _cancel_turn(self, conn: Connection) -> None:
        gov = self.governor
        if gov is not None:
            gov.cancel()
        if self.session_id is not None and not conn.closed:
            with trio.move_on_after(1):
                with contextlib.suppress(
                    ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError
                ):
                    await conn.notify("session/cancel", {"sessionId": self.session_id})

    async def _shutdown(self, process: Any, conn: Connection) -> None:
        """Close stdin and give the agent a moment; then SIGTERM; the sandbox's
        block SIGKILLs whatever is left of its tree."""
        with trio.move_on_after(EXIT_GRACE):
            with contextlib.suppress(Exception):  # the agent may be gone already
                await conn.close_stdin()
            await process.wait()
        if process.returncode is None:
            await _terminate(process)

    async def _pick_mode(self, conn: Connection, session: schema.NewSessionResponse) -> None:
        modes = session.modes
        if modes is None:
            return
        available = {m.id: m for m in modes.available_modes}
        current = modes.current_mode_id
        wanted = self.p.spec.mode
        if wanted is None and mode_asks(current, available.get(current)) is not True:
            wanted = next(
                (i for i, m in available.items() if mode_asks(i, m) is True and i != "plan"), None
            )
        if wanted and wanted != current:
            try:
                await conn.request(
                    "session/set_mode",
                    {"sessionId": session.session_id, "modeId": wanted},
                    timeout=30,
                )
                current = wanted
            except (RemoteError, RequestTimeout) as e:
                self.turn.notices.append(
                    f"could not switch {self.name} to mode {wanted}: {_short_error(e)}"
                )
        mode = available.get(current)
        self.mode = {
            "id": current,
            "name": mode.name if mode else current,
            "asks": mode_asks(current, mode),
        }
        with contextlib.suppress(AuditUnavailable):
            self.audit.record(
                "mode",
                session=self.session_id,
                subject=self.mode,
                verdict="allow",
                by="policy",
                reason=f"{self.name} runs in mode {current}",
            )

    def _on_notification(self, method: str, params: Any) -> None:
        """Fold one ``session/update`` into the turn.

        The hot path of a chatty agent: the ``sessionUpdate`` kind is read first,
        kinds the attempt does not fold (thoughts, command lists, titles...) are
        dropped unvalidated, and only the update itself is validated, with its own
        schema model (`_UPDATE_MODELS`), not the whole notification union."""
        if method != "session/update":
            return
        try:
            raw = params["update"]
            kind = raw["sessionUpdate"]
            fold = _FOLDS.get(kind)
        except (TypeError, KeyError, IndexError):  # not objects, no kind, an unhashable kind
            fold = kind = None
        if fold is None:
            if type(kind) is not str:
                self.turn.bad_updates += 1
                log.warning("agent.bad_update", kind=str(kind)[:40])
            elif kind not in _KNOWN_UPDATES:
                self.turn.unknown_updates += 1
            return  # or a known kind the attempt does not fold
        if params.get("sessionId") != self.session_id and self.session_id is not None:
            log.warning("agent.update_for_unknown_session")
            return
        validate, folder = fold
        try:
            update = validate(raw)
        except ValidationError:
            self.turn.bad_updates += 1
            log.warning("agent.bad_update", kind=kind[:40])
            return
        folder(self, update, raw)

    def _fold_message(self, update: Any, raw: Any) -> None:
        turn = self.turn
        mid = update.message_id
        if mid is not None and mid != turn.message_id:
            turn.message = []
            turn.message_id = mid
        text = getattr(update.content, "text", None)
        if type(text) is str:
            turn.message.append(text)
            self.emit("message", {"text": text})

    def _fold_tool_call(self, update: Any, raw: Any) -> None:
        gov = self.governor
        if gov is None:
            return
        if update.session_update == "tool_call":
            self.turn.message = []  # the final message is what follows the last tool call
        state = gov.observe_tool_call(update)
        self.emit(
            "tool_call",
            {"id": state.id, "title": state.title, "kind": state.kind, "status": state.status},
        )

    def _fold_plan(self, update: Any, raw: Any) -> None:
        self.turn.plan_update = update  # dumped once, for the outcome
        if self.p.spec.on_event is not None:
            # The entries as the agent sent them (validated): dumping the model at
            # every plan update would cost more than validating it.
            self.emit("plan", {"entries": raw["entries"]})

    def _fold_usage(self, update: Any, raw: Any) -> None:
        self.turn.add_usage(update)

    def _fold_mode(self, update: Any, raw: Any) -> None:
        self.turn.mode_id = update.current_mode_id
        if self.mode is None or self.mode.get("id") != update.current_mode_id:
            self.mode = {
                "id": update.current_mode_id,
                "name": update.current_mode_id,
                "asks": mode_asks(update.current_mode_id, None),
            }
            self.turn.notices.append(
                f"{self.name} switched itself to mode {update.current_mode_id}"
            )

    def _login_line(self) -> str:
        for m in getattr(self, "auth_methods", []) or []:
            meta = getattr(m, "field_meta", None) or {}
            ta = meta.get("terminal-auth") if isinstance(meta, dict) else None
            if isinstance(ta, dict) and ta.get("command"):
                return " ".join([ta["command"], *map(str, ta.get("args", []))])
        if self.p.preset is not None and self.p.preset.login:
            return self.p.preset.login
        for m in getattr(self, "auth_methods", []) or []:
            if getattr(m, "description", None):
                return str(m.description)
        return "its own login"

    def _unasked_changes(self, before: Any, after: Any) -> None:
        gov = self.governor
        if gov is None:
            return
        changes = diff(before, after)
        covered = {p for subject in self.audit.unasked for p in subject.get("paths", [])}
        windows = [(a, b or time.time_ns()) for a, b in confine.command_windows(gov.terminals)]
        for change in unexplained(changes, gov.written, windows, after):
            if change.path in covered:
                continue
            try:
                self.audit.record(
                    "unasked",
                    session=self.session_id,
                    subject={"path": change.path, "change": change.how},
                    verdict="reported",
                    by="sandbox",
                    reason=f"{change.path} was {change.how} in the roots and no governed write or command explains it",
                )
            except AuditUnavailable:
                break
        if not after.complete:
            self.turn.notices.append(
                "the workspace has more files than the governor walks; unasked changes beyond the first 50,000 files were not looked for"
            )

    def _outcome(self) -> Outcome:
        p = self.p
        gov = self.governor
        message = "".join(self.turn.message)
        judgement: Judgement
        command_result = getattr(self, "command_result", None)
        if command_result is not None and not (self.timed_out or self.interrupted):
            code, out, err = command_result
            if code == 0:
                judgement = judged(out)
            else:
                why = out.strip() or " | ".join(
                    line for line in err.splitlines()[-5:] if line.strip()
                )
                how = "by a signal" if code is not None and code < 0 else str(code)
                judgement = Judgement("failed", f"{self.name} exited {how}: {why[:500]}")
        elif gov is not None and gov.pending is not None:
            judgement = Judgement("needs_approval", str(gov.pending.get("reason")))
        elif gov is not None and gov.failure:
            judgement = Judgement("failed", gov.failure)
        elif (gave_up := getattr(getattr(self, "conn", None), "gave_up", None)) is not None:
            judgement = Judgement(
                "failed", f"{self.name} {gave_up}; the governor stopped listening to it"
            )
        elif self.interrupted:
            judgement = Judgement(
                "failed",
                f"the governor was interrupted after {time.monotonic() - self.started:.0f} s; "
                f"{self.name}'s turn was cancelled",
            )
        elif self.sign_in is not None:
            judgement = Judgement("failed", self.error)
        elif self.timed_out:
            judgement = Judgement(
                "failed",
                f"{self.name} did not finish within {p.spec.timeout:g} s; its turn was cancelled",
            )
        elif self.stop_reason is not None:
            judgement = from_stop_reason(self.stop_reason, message, self.name)
        elif self.error is not None:
            judgement = Judgement("failed", self.error)
        else:
            judgement = Judgement("failed", f"{self.name} ended without an answer")
        reason = judgement.reason
        tail = getattr(getattr(self, "conn", None), "stderr_tail", [])
        if judgement.status == "failed" and tail:
            last = next((line for line in reversed(tail) if line.strip()), None)
            if last and reason and last not in reason:
                reason = f"{reason} -- {self.name} said: {last[:500]}"
        t = self.audit.tallier.tally()
        unasked_paths = sorted(
            {
                pth
                for subject in self.audit.unasked
                for pth in (subject.get("paths") or [subject.get("path")])
                if pth
            }
        )
        notices = list(self.turn.notices)
        if t.unasked:
            notices.append(
                f"{self.name} did {t.unasked} thing(s) without asking: {', '.join(unasked_paths) or 'see the log'}"
            )
        if not (p.spec.sandbox_agent and p.policy.capability < Capability.FULL_ACCESS):
            notices.append(
                f"{self.name} ran without the agent sandbox: what it did without asking was not confined"
            )
        if self.turn.bad_updates:
            notices.append(
                f"{self.name} sent {self.turn.bad_updates} malformed session update(s); they were logged and ignored"
            )
        asks = None if self.mode is None else self.mode.get("asks")
        acp = AcpReport(
            agent=self.name,
            preset=p.preset.id if p.preset else p.agent_id,
            mode=self.mode,
            decides_alone=asks is False or t.unasked > 0,
            known=asks is not None,
            unasked=t.unasked,
            unasked_paths=unasked_paths,
            tally=t,
            plan=self.turn.plan,
            notices=notices,
            sandboxed_agent=p.spec.sandbox_agent and p.policy.capability < Capability.FULL_ACCESS,
        )
        audit = self.audit
        outcome = Outcome(
            status=judgement.status,
            reason=reason,
            summary=judgement.summary,
            run_id=self.id,
            tool_calls=lambda: [
                r for r in audit.records if r.get("kind") not in ("attempt-start", "attempt-end")
            ],
            usage=self.turn.usage,
            acp=acp,
            pending=gov.pending if gov is not None else None,
            log=str(p.log_path) if p.log_path else None,
            duration_s=round(time.monotonic() - self.started, 3),
            sign_in=self.sign_in,
        )
        masked = p.masker
        outcome.reason = masked.text(outcome.reason) if outcome.reason else None
        outcome.summary = masked.text(outcome.summary) if outcome.summary else None
        acp.notices = [masked.text(n) for n in acp.notices]
        acp.plan = masked.json(acp.plan)  # the agent's words
        outcome.pending = masked.json(outcome.pending)  # the request as the agent sent it
        return outcome


_KNOWN_UPDATES: Final = frozenset(
    {
        "user_message_chunk",
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
        "available_commands_update",
        "current_mode_update",
        "config_option_update",
        "session_info_update",
        "usage_update",
    }
)

_UPDATE_MODELS: Final[Mapping[str, Any]] = {
    "agent_message_chunk": schema.AgentMessageChunk,
    "tool_call": schema.ToolCallStart,
    "tool_call_update": schema.ToolCallProgress,
    "plan": schema.AgentPlanUpdate,
    "usage_update": schema.UsageUpdate,
    "current_mode_update": schema.CurrentModeUpdate,
}
"""The updates the attempt folds, each validated with its own schema model."""

_FOLDERS: Final[Mapping[str, Callable[[_Attempt, Any, Any], None]]] = {
    "agent_message_chunk": _Attempt._fold_message,
    "tool_call": _Attempt._fold_tool_call,
    "tool_call_update": _Attempt._fold_tool_call,
    "plan": _Attempt._fold_plan,
    "usage_update": _Attempt._fold_usage,
    "current_mode_update": _Attempt._fold_mode,
}
_FOLDS: Final[Mapping[str, tuple[Callable[[Any], Any], Callable[[_Attempt, Any, Any], None]]]] = {
    # The model's validator itself: `model_validate` adds a call around it.
    kind: (model.__pydantic_validator__.validate_python, _FOLDERS[kind])
    for kind, model in _UPDATE_MODELS.items()
}

_ASKS: Final = re.compile(
    r"(?i)^(default|ask|read-only|readonly|manual|normal)$|requires? approval|ask(s)? (before|first|for)"
)
_ALONE: Final = re.compile(
    r"(?i)bypass|accept.?edits|dont.?ask|yolo|auto|full.?access|agent|without asking"
)


def mode_asks(mode_id: str | None, mode: Any) -> bool | None:
    """Whether a mode asks before acting: True, False, or None when it cannot be told."""
    if mode_id is None:
        return None
    text = " ".join(
        filter(None, [mode_id, getattr(mode, "name", None), getattr(mode, "description", None)])
    )
    if _ALONE.search(mode_id) or (_ALONE.search(text) and not _ASKS.search(mode_id)):
        return False
    if _ASKS.search(mode_id) or _ASKS.search(text) or mode_id == "plan":
        return True
    return None


def _redacted_argv(argv: Sequence[str], secret_tail: int) -> list[str]:
    if secret_tail <= 0:
        return list(argv)
    return [*argv[: len(argv) - secret_tail], f"<{secret_tail} raw args, not shown>"]


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _short_error(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return text if len(text) <= 300 else text[:299] + "…"


def _version() -> str:
    from governor import __version__

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
