"""An attempt described before it happens, and every check that must pass first.

Rules of this file:

- **Least authority by default.** No policy means read-only; the agent is
  sandboxed; asks are refused (unattended); the agent's environment is the
  basics plus what its preset and the job declare, nothing else of ours.
- **Every problem at once.** `prepare` looks at the whole spec and raises
  `RefusedBeforeStart` with every problem it found (the ceiling's violations,
  unset variables, missing directories, an agent that is not installed...),
  so an operator fixes a job in one round, not one error at a time.
- **The agent is a sum type.** After `prepare`, what runs is an `Agent` (an ACP
  program: a preset's or an argv of your own) or a `PlainProgram` (a plain program),
  never a bag of optional fields to re-check later.
"""

from __future__ import annotations

import functools
import glob
import math
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, Literal

from governor.agents.npm_installs import data_home
from governor.agents.presets import NotInstalled, Preset, PresetError, find, resolve
from governor.audit.log import Durability, inside
from governor.audit.signing import Signer, SigningUnavailable, load_signer
from governor.boundary.person_files import read_input_text
from governor.boundary.secrets import Masker, forwarding_problems
from governor.checks import canaries, held_out
from governor.confine import frozen, harness, model_api
from governor.confine import own_install as install
from governor.confine.egress import agent_hosts
from governor.gate.approver import (
    APPROVER_WORDS,
    Approver,
    Ask,
    Callback,
    approver_problem,
    for_on_ask,
)
from governor.job.ceiling_source import load_ceiling
from governor.job.policy_files import read_policy
from governor.mcp import servers as mcp_servers
from governor.policies.capability import Capability
from governor.policies.ceiling import (
    CUSTOM_AGENT,
    CUSTOM_COMMAND,
    Ceiling,
    check_job,
    parse_ceiling,
)
from governor.policies.errors import ConfigError, ConfigErrors
from governor.policies.mcp import McpServer
from governor.policies.network import HostPatternError, parse_pattern
from governor.policies.policy import Policy, check_commands, inside_globs
from governor.sandbox.host.concealed import attempts_dir, state_dir
from governor.sandbox.host.processes import written_places


class RefusedBeforeStart(Exception):
    """Nothing was started: every problem found, one per line (exit code 2)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass
class AttemptSpec:
    """Everything one attempt needs; mirrors `governor run`.

    The agent is a preset id (``agent``) or a program of your own (``argv``,
    an ACP agent, or with ``kind="command"`` a plain program), never both.
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
    approver: Approver | Callable[[Ask], Any] | Literal["unattended", "pause"] | None = None
    """Who decides an ``ask``: a function of an `Ask` (sync or async; 'once',
    'always', 'refuse' or a bool), an `Approver`, or ``"unattended"`` (refuse)
    or ``"pause"`` (end the attempt ``needs_approval``); None: the policy's ``on_ask``."""
    timeout: float | None = None
    """Seconds for the attempt; None: the policy's ``[limits] wall`` (default 1800).
    Given, it wins over the policy's, and the ceiling's ``max_wall`` bounds both."""
    log: str | Path | None = None
    sandbox_agent: bool = True
    env: Sequence[str] = ()
    model: str | None = None
    mode: str | None = None
    agent_args: Sequence[str] = ()
    append_rules: bool = False
    governor_tools: bool = False
    """Offer the governor's own tools as an MCP server (``--governor-tools``),
    as the policy's ``[mcp] governor_tools`` does (`governor.mcp.own_tools`)."""
    durability: Durability = "batch"
    on_event: Callable[[str, dict[str, Any]], None] | None = None
    max_line_bytes: int = 32 * 2**20
    environ: Mapping[str, str] | None = None
    """The environment the agent's variables come from (default: ``os.environ``)."""
    allow_hosts: Sequence[str] = ()
    """More ``host[:port]`` patterns the agent (and, with network on, its
    commands) may reach through the proxy (``--allow-host``)."""
    kind: Literal["acp", "command"] = "acp"
    """``command``: a plain program, not ACP: the prompt on its stdin, judged from its
    exit status, its last stdout line and the workspace diff."""
    checks: Sequence[str] = ()
    """More check commands (``--check``, a batch job's ``checks``) after the
    policy's ``[checks] commands``: shell lines run after the attempt, each in a
    fresh sandbox that cannot change the workspace; their verdict is the
    outcome's (`governor.checks.check_runs`)."""
    held_out: Sequence[str] = ()
    """More held-out globs (``--held-out``, a batch job's ``held_out``) besides the
    policy's ``[sandbox] held_out``: tests the agent never sees, put back only for
    the checks (`governor.checks.held_out`)."""
    mcp_servers: Sequence[McpServer] = ()
    """MCP servers for the agent besides the policy's ``[[mcp.servers]]``
    (`governor.policies.mcp`): each relayed by the governor, run in a sandbox of its
    own, every call decided by the policy's ``[mcp]`` rules."""
    trace_id: str | None = None
    """The OpenTelemetry trace this attempt belongs to (32 lowercase hex digits, as
    `governor.observe.otel` makes it): written in the attempt-start record and the outcome,
    so that a trace and a log can be joined."""
    concealed: Sequence[str | Path] = ()
    """Host folders no sandbox of the attempt shows, each an empty folder inside
    (a batch job's source repository: `governor.batch.work`)."""
    tried: Mapping[str, Any] | None = None
    """Set by `governor.attempt.tries` for a try after the first: its number, how many at
    most, the previous try's run id and log head, and the sha256 of the digest
    its prompt carries; written in the attempt-start record (``try``), so each
    try's log names the one it followed."""

    def __post_init__(self) -> None:
        # refused here, not at the agent's first ask (where a word taken for a
        # function failed inside the attempt and was answered as a refusal)
        if (problem := approver_problem(self.approver)) is not None:
            raise TypeError(problem)


@dataclass(frozen=True)
class Agent:
    """An ACP agent: a preset's program (``id`` is the preset's) or an argv of your
    own (``id`` is ``acp``). ``argv[0]`` is what runs; raw args are appended."""

    id: str
    argv: tuple[str, ...]
    preset: Preset | None = None
    via_npx: bool = False
    """Found through ``npx -y <package>``: its sandbox keeps npm's cache too."""


@dataclass(frozen=True)
class PlainProgram:
    """A plain program: the prompt on its stdin, judged from its exit status, its
    last output and the workspace diff."""

    argv: tuple[str, ...]
    id: str = CUSTOM_COMMAND
    preset: None = None
    via_npx: bool = False


Executor = Agent | PlainProgram


@dataclass(frozen=True)
class Prepared:
    """A spec that passed every check: the bound policy (its limits all set: the
    job's, else the defaults lowered to the ceiling's maxima), the ceiling, what
    runs, its environment, the masker, the log's path and the approver. The
    spec's ``timeout`` is the limits' ``wall``."""

    spec: AttemptSpec
    policy: Policy
    ceiling: Ceiling
    executor: Executor
    env: dict[str, str]
    masker: Masker
    log_path: Path | None
    approver: Approver
    signer: Signer | None = None
    """The operator's key that signs the end record (`governor.audit.signing`)."""
    relay_token: str = ""
    """What the agent's MCP shims say to this attempt's relay
    (`governor.mcp.relay.McpRelay.admitted`): a secret, in the masker."""

    @property
    def wall(self) -> float:
        """Seconds for the attempt: the limits' ``wall`` (``--timeout`` when given)."""
        return self.policy.limits.wall or self.spec.timeout or 0.0

    @property
    def shown_argv(self) -> list[str]:
        """The agent's argv as records show it: raw agent args counted, never shown."""
        argv, secret = list(self.executor.argv), len(self.spec.agent_args)
        return argv if secret <= 0 else [*argv[:-secret], f"<{secret} raw args, not shown>"]

    @property
    def sandboxed_agent(self) -> bool:
        """Whether the agent process runs inside the sandbox."""
        return self.spec.sandbox_agent and self.policy.capability < Capability.FULL_ACCESS

    @property
    def name(self) -> str:
        """The agent's name in reasons until it introduces itself."""
        e = self.executor
        if e.preset is not None:
            return e.preset.name
        return Path(e.argv[0]).name if e.argv else e.id


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


_TRACE_ID: Final = re.compile(r"(?!0{32})[0-9a-f]{32}")

EMPTY_PROMPT: Final = "the prompt is empty or only whitespace: give the agent a task"
"""The problem of a spec with no task: an agent given nothing to do would run,
spend the wall and write a log of nothing."""


def prepare(spec: AttemptSpec) -> Prepared:
    """Every check that must pass before anything starts; all problems at once."""
    problems: list[str] = []
    environ = dict(os.environ if spec.environ is None else spec.environ)
    if not spec.prompt.strip():
        problems.append(EMPTY_PROMPT)
    wall = spec.timeout
    if spec.log is not None:
        problems.extend(_log_problems(Path(spec.log).expanduser().resolve()))
    if wall is not None and not (0 < wall < math.inf):
        wall = None  # the ceiling judges the policy's own wall instead
        problems.append(
            f"the timeout {spec.timeout:g} is not a number of seconds above 0: give --timeout "
            "a positive number (or leave it out for the policy's [limits] wall)"
        )
    policy = _load(problems, _load_policy, spec.policy) or Policy()
    if spec.capability is not None:
        try:
            cap = (
                spec.capability
                if isinstance(spec.capability, Capability)
                else Capability.parse(spec.capability)
            )
        except ValueError as e:
            problems.append(str(e))
        else:
            policy = replace(policy, capability=cap)
    if spec.checks:
        try:
            added = check_commands("checks", "", list(spec.checks))
        except ConfigError as e:
            problems.append(str(e))
        else:
            policy = replace(policy, checks=policy.checks + added)
    if spec.held_out:
        try:
            more = inside_globs("--held-out", "held_out", list(spec.held_out))
        except ConfigError as e:
            problems.append(str(e))
        else:
            held = tuple(dict.fromkeys(policy.held_out_globs + more))
            policy = replace(policy, held_out_globs=held)
    if spec.governor_tools:
        policy = replace(policy, mcp=replace(policy.mcp, governor_tools=True))
    if spec.mcp_servers:
        servers = policy.mcp.servers + tuple(spec.mcp_servers)
        policy = replace(policy, mcp=replace(policy.mcp, servers=servers))
    problems.extend(
        mcp_servers.problems(
            policy.mcp.servers, environ, governor_tools=policy.mcp.governor_tools
        )
    )
    ceiling = _load(problems, _load_ceiling, spec.ceiling)
    allowed: list[str] = []
    for host in spec.allow_hosts:
        try:
            parse_pattern(host)
        except HostPatternError as e:
            problems.append(f"--allow-host: {e}")
        else:
            allowed.append(host)
    if ceiling is not None:
        violations = check_job(
            policy,
            ceiling,
            agent=_agent_id(spec) if _known_agent(spec) else None,
            agent_args=spec.agent_args,
            hosts=allowed,
            wall=wall,
        )
        problems.extend(f"refused by the ceiling ({ceiling.source}): {v}" for v in violations)
    if spec.trace_id is not None and not _TRACE_ID.fullmatch(spec.trace_id):
        problems.append(f"trace_id {spec.trace_id!r} is not a trace id: 32 lowercase hex digits")
    signer = None
    if ceiling is not None:
        try:
            signer = load_signer(ceiling.audit_key, environ)
        except SigningUnavailable as e:
            problems.append(str(e))
    problems.extend(
        forwarding_problems(
            forwarded(spec.env, policy, environ), None if signer is None else signer.held_in
        )
    )
    if (upstream := model_api.upstream_problem()) is not None:
        problems.append(upstream)
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
    executor = _executor(spec, environ, problems)
    preset = executor.preset if executor is not None else None
    if preset is not None and not policy.allow_mode_switch:
        switches = [n for n in dict.fromkeys([*spec.env, *policy.env]) if n in preset.alone_env]
        if switches:
            problems.append(
                f"{', '.join(switches)} would make {preset.id} act without asking: "
                "not passed unless the policy sets allow_mode_switch"
            )
    if problems or ceiling is None or executor is None:
        raise RefusedBeforeStart(problems)
    ws = str(workspace.resolve())
    key: tuple[str, ...] = (
        () if ceiling.audit_key is None else (os.path.realpath(os.path.expanduser(ceiling.audit_key)),)
    )
    log_path = _log_path(spec, ws)
    hidden = (*(os.path.realpath(os.path.expanduser(c)) for c in spec.concealed),
              *_log_family(log_path))  # fmt: skip
    # one in a root is the agent's to see (a policy file in the workspace): masked
    # there, it would read as empty and git would see it changed
    key += tuple(h for h in hidden if inside(h, (ws, *extra)) is None)
    bound = policy.bind(
        ws, tuple(extra) if spec.extra_dirs else None, protected=ceiling.protected, masked=key
    )
    bound = harness.with_named(bound, environ)
    if not spec.extra_dirs:
        problems.extend(
            f"an extra directory of the policy does not exist: {d}"
            for d in bound.roots[1:]
            if not os.path.isdir(d)
        )
    if log_path is not None and (root := inside(log_path, bound.roots)) is not None:
        problems.append(
            f"the audit log {log_path} is inside the root {root}, where the agent could "
            "rewrite it: give --log (or $XDG_STATE_HOME) a place outside every root"
        )
    if (root := inside(attempts_dir(), bound.roots)) is not None:
        problems.append(
            f"the governor's folder for attempts {attempts_dir()} is inside the root {root}, "
            "where the agent would reach every attempt's sockets and workspaces: set "
            "$XDG_STATE_HOME to a place outside every root"
        )
    data = data_home(environ).parent  # the agents the governor installed, MCP servers, its empty cwd
    if (root := inside(data, bound.roots)) is not None:
        problems.append(
            f"the governor's data folder {data} is inside the root {root}, where the agent "
            "could leave what a later `governor agents install` or MCP server start trusts: set "
            "$XDG_DATA_HOME to a place outside every root"
        )
    problems.extend(_state_in_agent_homes(preset, environ))
    if bound.capability == Capability.EDIT_WORKSPACE:  # only there are the roots writable
        problems.extend(install.problems(bound.roots))
    if not problems:  # the walk of the roots only once the roots are known good
        problems.extend(loud_globs(bound, sandboxed=spec.sandbox_agent))
    if problems:
        raise RefusedBeforeStart(problems)
    limits = bound.limits.with_wall(spec.timeout).effective(ceiling.max_limits)
    bound = replace(bound, limits=limits)
    agent_env = _agent_env(environ, executor.preset, [*spec.env, *policy.env], model=spec.model)
    bound = replace(
        bound,
        network_rules=bound.network_rules.with_allowed(allowed).with_agent(
            agent_hosts(executor.preset, agent_env)
        ),
    )
    token = mcp_servers.relay_token()
    return Prepared(
        spec=replace(spec, timeout=limits.wall),
        policy=bound,
        ceiling=ceiling,
        executor=executor,
        env=agent_env,
        masker=Masker.from_environ(
            environ,
            [
                *spec.agent_args,
                *mcp_servers.secrets(bound.mcp, environ),
                *(() if signer is None else signer.unsaid()),
                token,
            ],
        ),
        log_path=log_path,
        approver=_approver(spec.approver, bound),
        signer=signer,
        relay_token=token,
    )


def loud_globs(policy: Policy, *, sandboxed: bool = True) -> list[str]:
    """What is wrong with the bound ``policy``'s frozen and held-out globs before
    start: a glob that matches nothing (`governor.confine.frozen.unmatched`), a held-out
    path git tracks (`governor.checks.held_out.tracked`), a held-out test file the
    canaries' copier cannot copy (`governor.checks.canaries.uncopied`), tests held out from an agent
    that runs outside a sandbox (it would read the governor's folder they wait in)."""
    problems: list[str] = []
    if policy.held_out and (not sandboxed or policy.capability >= Capability.FULL_ACCESS):
        problems.append(
            "[sandbox] held_out needs the agent sandbox: an agent outside one (full-access, "
            "--no-sandbox-agent) can read the folder the held-out tests wait in"
        )
    try:
        problems.extend(frozen.unmatched(policy))
    except frozen.FrozenTooLarge as e:
        problems.append(str(e))
    problems.extend(held_out.tracked(policy))
    problems.extend(canaries.uncopied(policy))
    return problems


def forwarded(
    env: Sequence[str], policy: Policy, environ: Mapping[str, str]
) -> list[tuple[str, str | None, str]]:
    """Every variable a job forwards into a sandbox or a header, with its value
    and where it was named, for `governor.boundary.secrets.forwarding_problems`: the
    job's ``env`` (``--env``, a batch job's), the policy's (the agent, its
    commands, its checks), each MCP server's ``env`` and an HTTP server's
    ``headers`` (a library call's values included)."""
    named = [(n, environ.get(n), "--env (the job's env)") for n in env]
    named += [(n, environ.get(n), "the policy's env (the agent, commands, checks)") for n in policy.env]
    for server in policy.mcp.servers:
        where = f"[[mcp.servers]] {server.name}"
        named += [(n, environ.get(n), f"{where} env") for n in server.env]
        named += [(n, v, f"{where} env") for n, v in server.env_values.items()]
        named += [(v, environ.get(v), f"{where} headers.{h}") for h, v in server.headers]
        named += [(f"headers.{h}", v, f"{where} headers") for h, v in server.header_values.items()]
    return named


def _agent_id(spec: AttemptSpec) -> str:
    return spec.agent or (CUSTOM_COMMAND if spec.kind == "command" else CUSTOM_AGENT)


def _known_agent(spec: AttemptSpec) -> bool:
    """Whether the ceiling can judge the agent: an id that is no preset is refused
    as such (with the presets listed), not as an agent the ceiling does not allow."""
    if spec.agent is None:
        return True
    try:
        find(spec.agent)
    except PresetError:
        return False
    return True


def _executor(
    spec: AttemptSpec, environ: Mapping[str, str], problems: list[str]
) -> Executor | None:
    """What runs, or None with the reasons added to `problems`."""
    own = [*(spec.argv or [])]
    if (spec.agent is None) == (not own):
        # in both spellings: the library's field and the command line's flag
        given, twice = (
            ("no agent was given", "")
            if spec.agent is None
            else ("both a preset and a command were given", ", not both")
        )
        problems.append(
            f"say which agent: {given}; give a preset (agent=ID, --agent ID; `governor "
            f"presets` lists them) or an ACP command (argv=[...], the words after --){twice}"
        )
        return None
    if spec.agent is None:
        argv = (*own, *spec.agent_args)
        if "/" not in argv[0] and not shutil.which(argv[0], path=environ.get("PATH")):
            problems.append(f"the agent command {argv[0]!r} is not on PATH")
            return None
        return PlainProgram(argv) if spec.kind == "command" else Agent(CUSTOM_AGENT, argv)
    if spec.kind == "command":
        problems.append(f"--kind command runs the program after --, not a preset ({spec.agent!r})")
        return None
    try:
        preset = find(spec.agent)
    except PresetError as e:  # an unknown id, with the known ones
        problems.append(f"{e}: give --agent one of these presets, or an ACP command after --")
        return None
    which = functools.partial(shutil.which, path=environ.get("PATH"))
    found = resolve(preset, which=which, installs=data_home(environ))
    if isinstance(found, NotInstalled):
        problems.append(found.message)
        return None
    return Agent(preset.id, (*found.argv, *spec.agent_args), preset, found.via_npx)


def _load(problems: list[str], loader: Callable[[Any], Any], value: Any) -> Any:
    """`loader(value)`, or None with its problem added."""
    try:
        return loader(value)
    except RefusedBeforeStart as e:
        problems.extend(e.problems)
        return None


def _load_policy(value: Policy | str | Path | None) -> Policy:
    if value is None or isinstance(value, Policy):
        return value or Policy()
    try:
        return read_policy(value)
    except ConfigErrors as e:  # every problem of the file, one per line
        raise RefusedBeforeStart([str(one) for one in e.errors]) from None
    except ConfigError as e:
        raise RefusedBeforeStart([str(e)]) from None


def _load_ceiling(value: Ceiling | str | Path | None) -> Ceiling:
    if isinstance(value, Ceiling):
        return value
    try:
        if value is None:
            return load_ceiling(None)
        path = Path(value)
        text = read_input_text(path, written=written_places())  # never through an agent's link
        return parse_ceiling(text, f"{path} (--ceiling)")
    except OSError as e:
        raise RefusedBeforeStart([f"{value}: cannot read the ceiling: {e.strerror}"]) from None
    except ValueError as e:
        raise RefusedBeforeStart([str(e)]) from None


def _agent_env(
    environ: Mapping[str, str],
    preset: Preset | None,
    names: Sequence[str],
    *,
    model: str | None = None,
) -> dict[str, str]:
    """The agent's environment: the basics, its preset's credential, base-URL,
    model and relocation variables that are set, and the names the job declared.
    Nothing else of ours, but the model asked for in the variable its preset
    reads it from.

    The base URL goes with the key: the proxy allows the base URL's host
    (`governor.confine.egress.agent_hosts`), and an operator who set
    ``ANTHROPIC_BASE_URL`` for a gateway meant the agent to use it; without
    it the agent took the key to the preset's own host (which a gateway's
    network may not even resolve) and ran to the wall limit."""
    keep = list(BASE_ENV) + list(names)
    if preset is not None:
        keep += [*preset.env, *preset.base_url_env, *[r.var for r in preset.relocate]]
        keep += [preset.model_env] if preset.model_env is not None else []
    env = {k: environ[k] for k in dict.fromkeys(keep) if environ.get(k)}
    if model is not None and preset is not None and preset.model_env is not None:
        env[preset.model_env] = model
    if environ.get("IS_SANDBOX") == "yes":
        env["IS_SANDBOX"] = "1"  # "yes" makes Claude's adapters fail session/new as root
    return env


def _approver(value: Approver | Callable[[Ask], Any] | str | None, policy: Policy) -> Approver:
    if value is None:
        return for_on_ask(policy.on_ask)
    if isinstance(value, str):
        return APPROVER_WORDS[value]()
    if hasattr(value, "name") and callable(value):
        return value  # type: ignore[return-value]
    return Callback(value)


def default_log_dir() -> Path:
    """Where per-attempt audit logs go: ``$XDG_STATE_HOME/acp-governor/``, which
    no sandbox sees (`governor.sandbox.host.concealed`)."""
    return state_dir()


def _log_problems(path: Path) -> list[str]:
    """Why the audit log cannot be made at `path`, found before anything starts:
    opened later, a parent that is a file fails as a bare "File exists" once the
    attempt is under way."""
    if path.is_dir():
        return [f"the audit log {path} is a directory: give --log a file's path"]
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                return [
                    f"the audit log {path} cannot be made: {parent} is not a directory; "
                    "give --log a path under a directory"
                ]
            return []
    return []


def _state_in_agent_homes(preset: Preset | None, environ: Mapping[str, str]) -> list[str]:
    """A refusal when the governor's state folder (``$XDG_STATE_HOME``: every
    attempt's folders, the default audit logs) lies in a home folder the
    preset's sandbox keeps writable (``~/.codex``, where ``CODEX_HOME`` puts
    it): the agent would write where the next attempt's sockets, workspaces and
    logs are made, before they exist and so before they are hidden."""
    home = environ.get("HOME", "")
    if preset is None or not os.path.isabs(home):
        return []
    state = os.path.realpath(state_dir())
    for folder in preset.home_paths(environ, Path(home)):
        real = os.path.realpath(folder)
        if state == real or state.startswith(real.rstrip(os.sep) + os.sep):
            return [
                f"the governor's state folder {state_dir()} is inside {folder}, a home folder "
                f"the {preset.id} agent may write: set $XDG_STATE_HOME to a place outside it"
            ]
    return []


def _log_family(log: Path | None) -> tuple[str, ...]:
    """The audit log the attempt writes and its tries' logs beside it
    (``NAME.tryN.SUFFIX``, `governor.attempt.tries.try_log`), masked in every sandbox
    of the attempt: a ``--log`` outside the homes was readable there, and an
    earlier try's log holds its checks' output (a held-out test's traceback).
    The default log is in the state folder, hidden whole."""
    if log is None:
        return ()
    first = log.with_name(re.sub(r"\.try[0-9]+$", "", log.stem) + log.suffix)
    tries = first.parent.glob(glob.escape(first.stem) + ".try*" + glob.escape(first.suffix))
    return tuple(dict.fromkeys(os.path.realpath(p) for p in (log, first, *sorted(tries))))


def _log_path(spec: AttemptSpec, workspace: str) -> Path | None:
    if spec.log is not None:  # its folder resolved, not its name: a link there is not followed
        named = Path(spec.log).expanduser().absolute()
        return named.parent.resolve() / named.name
    stamp = time.strftime("%Y%m%dT%H%M%S")
    name = f"{Path(workspace).name or 'root'}-{stamp}-{uuid.uuid4().hex[:6]}.jsonl"
    return default_log_dir() / name
