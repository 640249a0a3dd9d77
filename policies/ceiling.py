"""The operator's ceiling and the pure check of a run request against it.

A job description can come from a repository the operator did not write, so it
is untrusted input. The ceiling is a separate, operator-owned value that bounds
what any job may ask for. `check` never clamps: a request over the ceiling is an
error listing *every* violation, because a silently weakened run is how a job
that believes it may edit ends up doing nothing and reporting success.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from governor.policies.capability import Capability, CapabilityError
from governor.policies.config_values import boolean, string_list, type_name
from governor.policies.errors import ConfigError, toml_error, unknown_key
from governor.policies.limits import LIMIT_KEYS, Limits, limits_from_mapping
from governor.policies.network import HostPatternError, parse_pattern
from governor.policies.paths import is_under

if TYPE_CHECKING:
    from governor.policies.mcp import McpServer
    from governor.policies.policy import Policy

CUSTOM_AGENT: Final = "acp"
"""The agent id of an ACP program given as an argv rather than a preset."""
CUSTOM_COMMAND: Final = "command"
"""The agent id of a plain program (not ACP): the prompt on stdin, judged by its diff."""


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What one attempt asks for, as far as the ceiling is concerned."""

    agent: str | None
    """None: no agent named (``governor check`` without ``--agent``, ``governor
    sandbox``): the rest is judged alone."""
    capability: Capability = Capability.READ_ONLY
    agent_args: tuple[str, ...] = ()
    """Raw arguments appended to a preset's argv: a privileged channel, secret."""
    network: bool = False
    """Network for the commands the governor runs (the agent's own is separate)."""
    keep: tuple[str, ...] = ()
    """Folders the job's ``[sandbox] keep`` names, as written (``~/`` or absolute)."""
    limits: Limits = field(default_factory=Limits)
    """The limits the job set (its ``[limits]``, ``--timeout`` as ``wall``); unset
    ones are None and take the defaults, lowered to the maxima (never refused)."""
    hosts: tuple[str, ...] = ()
    """Host patterns the job names (its ``[network]`` allow and ask, ``--allow-host``)."""
    mcp_servers: tuple[McpServer, ...] = ()
    """The MCP servers the job names (its policy's and a library call's)."""


@dataclass(frozen=True, slots=True)
class McpServerBound:
    """One entry of the ceiling's ``mcp_servers``: a server it permits, by name,
    by command, or both. ``command`` is an argv prefix the server's command must
    start with, word for word (``["mcp-server-time"]`` is that program with any
    arguments; ``["node", "/opt/mcp/fs/index.js"]`` that script under node)."""

    name: str | None = None
    command: tuple[str, ...] = ()

    def permits(self, server: McpServer) -> bool:
        """Whether ``server`` is this one."""
        if self.name is not None and server.name != self.name:
            return False
        return not self.command or server.command[: len(self.command)] == self.command

    def __str__(self) -> str:
        said = [] if self.name is None else [self.name]
        if self.command:
            said.append(" ".join(self.command))
        return " = ".join(said)


@dataclass(frozen=True, slots=True)
class Ceiling:
    """What any job may ask for. ``allowed_agents`` empty means *no* agent."""

    max_capability: Capability = Capability.EDIT_WORKSPACE
    allowed_agents: tuple[str, ...] = ()
    allow_agent_args: bool = False
    allow_network: bool = False
    protected: tuple[str, ...] = ()
    """Extra globs (relative to each root) no governed write may touch."""
    keep_within: tuple[str, ...] = ()
    """Folders inside which a job's ``[sandbox] keep`` may name one to keep
    visible (``~/`` or absolute); empty: none."""
    max_limits: Limits = field(default_factory=Limits)
    """The most a job's ``[limits]`` may ask for (``max_memory``, ...); None: no maximum."""
    allowed_hosts: tuple[str, ...] | None = None
    """Host patterns a job may name at most (``*.example.com`` covers its
    subdomains, no port covers every port, ``*`` everything); None (the
    built-in default): any; a ceiling file without the key: none."""
    audit_key: str | None = None
    """The file of the Ed25519 key that signs each attempt's end record (the
    operator's; a job's policy cannot name one); None: not signed."""
    mcp_servers: tuple[McpServerBound, ...] | None = None
    """The MCP servers a job may name (by name, command, or both); None (the
    built-in default): any; a ceiling file without the key: none."""
    mcp_writable: bool = True
    """Whether a job's MCP server may be ``writable`` (a ceiling file without
    the key: no)."""
    mcp_network: bool = True
    """Whether a job's MCP server may reach the network: a stdio server's
    ``network`` hosts, an HTTP server's own host (a ceiling file without the
    key: no); those hosts are bounded by ``allowed_hosts`` too."""
    source: str = field(default="built-in default", compare=False)

    @classmethod
    def default(cls, agents: Iterable[str]) -> Ceiling:
        """The ceiling when the operator has none: edit-workspace, the given agents
        (every preset and a custom ACP argv), no raw agent args, no command network."""
        return cls(allowed_agents=tuple(agents))


@dataclass(frozen=True, slots=True)
class CapabilityExceeded:
    """The requested capability, then the permitted maximum (order matters)."""

    requested: Capability
    permitted: Capability

    def __str__(self) -> str:
        return (
            f"requested capability {self.requested} exceeds the permitted maximum {self.permitted}"
        )


@dataclass(frozen=True, slots=True)
class AgentArgsForbidden:
    """Raw agent args while the channel is closed.

    **Never render the values**: this is the one field a job could write a
    credential into, so the message counts them. The tuple stays for programs.
    """

    args: tuple[str, ...] = field(repr=False)

    def __str__(self) -> str:
        return (
            f"raw agent arguments are not permitted; {len(self.args)} requested, "
            "and their values are secret and are not shown"
        )

    def __repr__(self) -> str:
        return f"AgentArgsForbidden(<{len(self.args)} secret args>)"


@dataclass(frozen=True, slots=True)
class AgentForbidden:
    """The requested agent, then the permitted ones."""

    requested: str
    permitted: tuple[str, ...]

    def __str__(self) -> str:
        allowed = ", ".join(self.permitted) if self.permitted else "none"
        return f"agent {self.requested} is not permitted; permitted agents: {allowed}"


@dataclass(frozen=True, slots=True)
class NetworkForbidden:
    """Network for commands was requested and the ceiling forbids it."""

    def __str__(self) -> str:
        return "network for commands was requested and the ceiling does not permit it"


@dataclass(frozen=True, slots=True)
class KeepForbidden:
    """A folder to keep visible that no ``keep_within`` of the ceiling holds."""

    folder: str
    permitted: tuple[str, ...]

    def __str__(self) -> str:
        within = ", ".join(self.permitted) if self.permitted else "none (keep_within is empty)"
        return f"keeping {self.folder} visible is not permitted; permitted within: {within}"


@dataclass(frozen=True, slots=True)
class LimitExceeded:
    """A limit the job set above the ceiling's maximum (both rendered: ``512M``)."""

    key: str
    requested: str
    permitted: str

    def __str__(self) -> str:
        return (
            f"limits.{self.key} = {self.requested} exceeds the permitted maximum "
            f"{self.permitted} (max_{self.key})"
        )


@dataclass(frozen=True, slots=True)
class HostForbidden:
    """A host pattern the job names that no ``allowed_hosts`` pattern covers."""

    host: str
    permitted: tuple[str, ...]
    server: str | None = None
    """The MCP server whose ``network`` names it (None: the job's own)."""

    def __str__(self) -> str:
        within = ", ".join(self.permitted) if self.permitted else "none (allowed_hosts is empty)"
        whose = f" for MCP server {self.server}" if self.server else ""
        return f"network access to {self.host}{whose} is not permitted; permitted hosts: {within}"


@dataclass(frozen=True, slots=True)
class McpServerForbidden:
    """An MCP server the job names that no ``mcp_servers`` entry permits."""

    server: str
    command: tuple[str, ...]
    """Its command (empty for an HTTP server), shown by its program only."""
    permitted: tuple[McpServerBound, ...]

    def __str__(self) -> str:
        within = ", ".join(map(str, self.permitted)) or "none (mcp_servers is empty)"
        program = f" ({self.command[0]})" if self.command else ""
        return f"MCP server {self.server}{program} is not permitted; permitted (mcp_servers): {within}"


@dataclass(frozen=True, slots=True)
class McpWritableForbidden:
    """A ``writable`` MCP server while the ceiling's ``mcp_writable`` is false."""

    server: str

    def __str__(self) -> str:
        return (
            f"MCP server {self.server} is writable; the ceiling does not permit "
            "writable MCP servers (mcp_writable = false)"
        )


@dataclass(frozen=True, slots=True)
class McpNetworkForbidden:
    """An MCP server with ``network`` hosts while ``mcp_network`` is false."""

    server: str
    hosts: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"MCP server {self.server} reaches network hosts ({', '.join(self.hosts)}); the "
            "ceiling does not permit MCP servers on the network (mcp_network = false)"
        )


Violation = (
    CapabilityExceeded
    | AgentArgsForbidden
    | AgentForbidden
    | NetworkForbidden
    | KeepForbidden
    | LimitExceeded
    | HostForbidden
    | McpServerForbidden
    | McpWritableForbidden
    | McpNetworkForbidden
)


def check(request: RunRequest, ceiling: Ceiling) -> RunRequest | list[Violation]:
    """The request *unchanged* when it fits, else every violation (never a clamp)."""
    violations: list[Violation] = []
    if request.agent is not None and request.agent not in ceiling.allowed_agents:
        violations.append(AgentForbidden(request.agent, ceiling.allowed_agents))
    if request.capability > ceiling.max_capability:
        violations.append(CapabilityExceeded(request.capability, ceiling.max_capability))
    if request.agent_args and not ceiling.allow_agent_args:
        violations.append(AgentArgsForbidden(request.agent_args))
    if request.network and not ceiling.allow_network:
        violations.append(NetworkForbidden())
    violations.extend(
        KeepForbidden(folder, ceiling.keep_within)
        for folder in request.keep
        if not any(_within(folder, bound) for bound in ceiling.keep_within)
    )
    violations.extend(LimitExceeded(*over) for over in request.limits.over(ceiling.max_limits))
    if ceiling.allowed_hosts is not None:
        violations.extend(
            HostForbidden(host, ceiling.allowed_hosts)
            for host in request.hosts
            if not any(_covers(bound, host) for bound in ceiling.allowed_hosts)
        )
    violations.extend(_mcp_violations(request.mcp_servers, ceiling))
    return violations if violations else request


def _mcp_violations(servers: Sequence[McpServer], ceiling: Ceiling) -> list[Violation]:
    """What of the job's MCP servers the ceiling does not permit, server by server."""
    found: list[Violation] = []
    for server in servers:
        bounds = ceiling.mcp_servers
        if bounds is not None and not any(b.permits(server) for b in bounds):
            found.append(McpServerForbidden(server.name, server.command, bounds))
        if server.writable and not ceiling.mcp_writable:
            found.append(McpWritableForbidden(server.name))
        hosts = tuple(h.text for h in server.hosts)  # an HTTP server's own host counts
        if hosts and not ceiling.mcp_network:
            found.append(McpNetworkForbidden(server.name, hosts))
        elif ceiling.allowed_hosts is not None:
            found.extend(
                HostForbidden(host, ceiling.allowed_hosts, server.name)
                for host in hosts
                if not any(_covers(bound, host) for bound in ceiling.allowed_hosts)
            )
    return found


def check_job(
    policy: Policy,
    ceiling: Ceiling,
    *,
    agent: str | None,
    agent_args: Sequence[str] = (),
    hosts: Sequence[str] = (),
    wall: float | None = None,
) -> list[Violation]:
    """Every violation of a job (empty: it fits): its policy, the agent it runs
    (None: none named), raw ``agent_args``, the ``hosts`` it adds
    (``--allow-host``) and a ``wall`` that wins over the policy's
    (``--timeout``). Every surface that asks "may this job run" asks here, so
    ``governor check`` cannot say "fits" for a job ``governor run`` refuses."""
    request = RunRequest(
        agent,
        policy.capability,
        tuple(agent_args),
        policy.network,
        keep=policy.keep,
        limits=policy.limits.with_wall(wall),
        hosts=(*policy.network_rules.patterns, *hosts),
        mcp_servers=policy.mcp.servers,
    )
    verdict = check(request, ceiling)
    return verdict if isinstance(verdict, list) else []


def _covers(bound: str, host: str) -> bool:
    """Whether the ceiling's pattern ``bound`` covers the job's pattern ``host``."""
    if bound.strip() == "*":
        return True
    try:
        outer, inner = parse_pattern(bound), parse_pattern(host)
    except HostPatternError:
        return False
    if outer.port is not None and outer.port != inner.port:
        return False
    if not outer.wildcard:
        return not inner.wildcard and outer.host == inner.host
    suffix = outer.host[1:]  # ".example.com"
    return inner.host.endswith(suffix) and inner.host != outer.host[2:]


def _within(folder: str, bound: str) -> bool:
    """Whether ``folder`` is ``bound`` or below it, as written (both ``~/`` or
    both absolute). A ``..`` never is: the folder is resolved only when the
    sandbox is made, and ``~/tools/link/..`` folded lexically is ``~/tools``
    while a symlink can lead it anywhere."""
    return ".." not in folder.split("/") and is_under(folder, bound)


_KEYS: Final = {
    "max_capability",
    "allowed_agents",
    "allow_agent_args",
    "allow_network",
    "protected",
    "keep_within",
    *(f"max_{name}" for name in LIMIT_KEYS),
    "allowed_hosts",
    "audit_key",
    "mcp_servers",
    "mcp_writable",
    "mcp_network",
}


def parse_ceiling(text: str, source: str = "ceiling.toml") -> Ceiling:
    """A ceiling from TOML text; strict: unknown keys, wrong types and bad values
    are `ConfigError`s naming the file and the key. Missing keys take the most
    restrictive reading except ``max_capability`` (edit-workspace, as the default)
    and the limits' maxima (``max_memory``, ``max_processes``, ``max_tmp``,
    ``max_cpu_seconds``, ``max_wall``, ``max_log``, ``max_workspace``, and the
    budgets' ``max_tool_calls``, ``max_tokens``, ``max_cost_usd``: none unless
    given)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise toml_error(source, text, e) from None
    for key in data:
        if key not in _KEYS:
            raise unknown_key(source, "", key, _KEYS)
    cap = Capability.EDIT_WORKSPACE
    if "max_capability" in data:
        cap = _capability(source, "max_capability", data["max_capability"])
    return Ceiling(
        max_capability=cap,
        allowed_agents=string_list(source, "allowed_agents", data.get("allowed_agents", [])),
        allow_agent_args=boolean(source, "allow_agent_args", data.get("allow_agent_args", False)),
        allow_network=boolean(source, "allow_network", data.get("allow_network", False)),
        protected=string_list(source, "protected", data.get("protected", [])),
        keep_within=string_list(source, "keep_within", data.get("keep_within", [])),
        max_limits=limits_from_mapping(
            source,
            "",
            {k: v for k, v in data.items() if k.startswith("max_") and k != "max_capability"},
            prefix="max_",
        ),
        allowed_hosts=_hosts(source, data.get("allowed_hosts", [])),
        audit_key=_audit_key(source, data.get("audit_key")),
        mcp_servers=_mcp_bounds(source, data.get("mcp_servers", [])),
        mcp_writable=boolean(source, "mcp_writable", data.get("mcp_writable", False)),
        mcp_network=boolean(source, "mcp_network", data.get("mcp_network", False)),
        source=source,
    )


def _mcp_bounds(source: str, value: Any) -> tuple[McpServerBound, ...]:
    """``mcp_servers``: names (``"git"``) and tables (``{ name = "git", command =
    ["mcp-server-git"] }``, either key or both)."""
    if not isinstance(value, list):
        raise ConfigError(source, "mcp_servers", f"expected an array, got {type_name(value)}")
    bounds: list[McpServerBound] = []
    for i, entry in enumerate(value):
        key = f"mcp_servers[{i}]"
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, dict):
            raise ConfigError(
                source, key, f"expected a server's name or a {{ name, command }} table, got {type_name(entry)}"
            )
        for name in entry:
            if name not in ("name", "command"):
                raise unknown_key(source, key, name, ("name", "command"))
        server = entry.get("name")
        if server is not None and (not isinstance(server, str) or not server):
            raise ConfigError(source, f"{key}.name", f"expected a server's name, got {type_name(server)}")
        command = string_list(source, f"{key}.command", entry.get("command", []))
        if server is None and not command:
            raise ConfigError(source, key, "give a name, a command, or both")
        if command and not command[0]:
            raise ConfigError(source, f"{key}.command", "the program is empty")
        bounds.append(McpServerBound(server, command))
    return tuple(bounds)


def _audit_key(source: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(source, "audit_key", f"expected the key file's path, got {type_name(value)}")
    if not value.startswith(("/", "~/")):
        # relative to what? the directory a run starts in is no place to look for a key
        raise ConfigError(source, "audit_key", f"{value!r} is relative: give an absolute or ~/ path")
    return value


def _hosts(source: str, value: Any) -> tuple[str, ...]:
    hosts = string_list(source, "allowed_hosts", value)
    for host in hosts:
        if host.strip() == "*":
            continue
        try:
            parse_pattern(host)
        except HostPatternError as e:
            raise ConfigError(source, "allowed_hosts", str(e)) from None
    return hosts


def _capability(source: str, key: str, value: Any) -> Capability:
    if not isinstance(value, str):
        raise ConfigError(source, key, f"expected a string, got {type_name(value)}")
    try:
        return Capability.parse(value)
    except CapabilityError as e:
        raise ConfigError(source, key, str(e)) from None
