"""MCP servers a job names, and the rules over what the agent calls there.

A policy's ``[mcp]`` section, strictly validated like the rest of the file::

    [[mcp.servers]]                   # a stdio server: its own sandbox, behind the governor
    name = "git"                      # letters, digits, - and _: the prefix of its rules
    command = ["mcp-server-git", "--repository", "."]
    env = ["GIT_AUTHOR_NAME"]         # names passed from the governor's environment
    writable = false                  # the workspace read-write for it (needs edit-workspace)
    timeout = 120                     # seconds one call may take before it is answered an error

    [[mcp.servers]]                   # an HTTP server: reached by the governor only
    name = "docs"
    url = "https://mcp.example.com/mcp"   # http:// only for a loopback host
    headers = { Authorization = "DOCS_TOKEN" }  # header -> the variable holding its whole value

    [mcp]
    governor_tools = true             # the governor's own run/read/write as a server "governor"

    [mcp.deny]                        # [mcp.ask] and [mcp.allow] take the same keys
    tools = ["git.git_commit", { tool = "fs.read_*", args = { path = "*/.env" } }]
    prompts = ["everything.*"]        # server.prompt globs
    resources = ["fs.file:///etc/*"]  # server.uri globs

A pattern is ``server.name``, both halves globs (`fnmatch.fnmatchcase`): the
server's name as written, then the tool's or prompt's name or the resource's
URI. An entry may be a table ``{ tool = PATTERN, args = { KEY = GLOB } }``: it
matches only when every named argument is there and its text (a string as is,
anything else as compact JSON) matches its glob.

`decide_mcp` is the engine's word on one call, in the order of
`governor.policies.decide`: the boundary (a server the job does not name is refused),
then deny > ask > allow, then the capability's default (`MCP_DEFAULTS`): a
tool no rule names is asked about below full-access -- the operator named the
server, not each thing it can do, and unattended an ask is refused -- and
allowed at full-access; reading a prompt or a resource is allowed (the server
runs in its own sandbox, which bounds what it can read).

``governor_tools`` offers the agent the governor's own tools as one more
server, named `OWN_SERVER` (`governor.mcp.own_tools`): its calls are the fs
and terminal requests they stand for, decided by the file and command rules,
not by these; so no job server may take that name while it is on.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal
from urllib.parse import unquote, urlsplit

from governor.policies import by as who
from governor.policies.capability import Capability
from governor.policies.config_values import boolean, string_list, table, type_name
from governor.policies.errors import ConfigError, clipped, unknown_key
from governor.policies.network import HostPattern, HostPatternError, parse_pattern
from governor.policies.rules import Verdict

McpMethod = Literal["tools/call", "prompts/get", "resources/read"]
SUBJECTS: Final[Mapping[str, str]] = {
    "tools/call": "tools",
    "prompts/get": "prompts",
    "resources/read": "resources",
}
"""The governed methods and the rule key that names their subjects."""

MCP_DEFAULTS: Final[Mapping[str, Mapping[Capability, Verdict]]] = {
    "tools": {
        Capability.READ_ONLY: Verdict.ASK,
        Capability.EDIT_WORKSPACE: Verdict.ASK,
        Capability.FULL_ACCESS: Verdict.ALLOW,
    },
    "prompts": {c: Verdict.ALLOW for c in Capability},
    "resources": {c: Verdict.ALLOW for c in Capability},
}
"""The verdict on a call no rule names, by subject and capability."""

SERVER_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}\Z")
"""The tool names MCP allows (its 2025-11-25 schema's advice): a call to any
other name (Unicode lookalikes, escapes, spaces) is refused and the tool hidden."""
OWN_SERVER: Final = "governor"
"""The name the governor's own tools are offered under (``governor_tools``)."""
MAX_SERVERS: Final = 32
CALL_TIMEOUT: Final = 120.0
_SERVER_KEYS: Final = ("name", "command", "url", "headers", "env", "writable", "network", "timeout")
_COMMAND_ONLY: Final = ("env", "writable", "network")
"""Keys of a sandboxed server's: an HTTP server runs nowhere of ours."""
_VARIABLE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_HEADER: Final = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}\Z")
RESERVED_HEADERS: Final = frozenset(
    {"accept", "content-type", "content-length", "host", "mcp-session-id", "mcp-protocol-version",
     "last-event-id", "connection", "transfer-encoding"}
)
"""Headers the relay's HTTP client sets itself: a policy may not name them."""
LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1"})
_MCP_KEYS: Final = ("servers", "governor_tools", "allow", "ask", "deny")
_RULE_KEYS: Final = ("tools", "prompts", "resources")
_ENTRY_KEYS: Final = ("tool", "args")


@dataclass(frozen=True, slots=True)
class McpServer:
    """One server a job names: a stdio ``command`` (run in a sandbox of its own)
    or an HTTP ``url`` (reached by the governor), never both.

    ``env`` holds names (the policy file's, values taken from the governor's
    environment) or, from a library call, names with values (``env_values``).
    ``headers`` (an HTTP server's) are (header, variable) pairs: the
    variable holds the header's whole value; a library call may give values
    itself (``header_values``, header -> value). Both are masked everywhere."""

    name: str
    command: tuple[str, ...] = ()
    url: str | None = None
    env: tuple[str, ...] = ()
    env_values: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    writable: bool = False
    network: tuple[HostPattern, ...] = ()
    """Hosts the server may reach through the governor's proxy (none by default)."""
    timeout: float = CALL_TIMEOUT
    headers: tuple[tuple[str, str], ...] = ()
    header_values: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not SERVER_NAME.match(self.name):
            raise ValueError(
                f"MCP server name {self.name!r} must be 1-64 letters, digits, - or _"
            )
        if bool(self.command) == (self.url is not None):
            raise ValueError(f"MCP server {self.name}: give a command or a url, exactly one")
        if self.url is not None and (wrong := url_problem(self.url)):
            raise ValueError(f"MCP server {self.name}: url: {wrong}")
        for header in (*(h for h, _ in self.headers), *self.header_values):
            if wrong := header_problem(header):
                raise ValueError(f"MCP server {self.name}: headers: {wrong}")
        if self.command and (self.headers or self.header_values):
            raise ValueError(f"MCP server {self.name}: headers are an HTTP server's (a url)")

    @property
    def stdio(self) -> bool:
        """Whether the governor runs it (a command) rather than reaches it (a url)."""
        return bool(self.command)

    @property
    def hosts(self) -> tuple[HostPattern, ...]:
        """Where connections of origin ``mcp:NAME`` may go: a stdio server's
        ``network`` hosts; an HTTP server's own host and port, which the
        operator named (and no other: a redirect elsewhere is refused)."""
        if self.url is None:
            return self.network
        host, port = url_host(self.url)
        return (parse_pattern(f"[{host}]:{port}" if ":" in host else f"{host}:{port}"),)


def url_host(url: str) -> tuple[str, int]:
    """The host (lower case, IPv6 without brackets) and port of a checked URL."""
    parts = urlsplit(url)
    assert parts.hostname is not None, url
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def url_problem(url: str) -> str | None:
    """What is wrong with an HTTP server's URL, or None: an https:// URL with a
    host, or http:// to a loopback host only (anything else would carry the
    agent's calls and the headers in clear)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError as e:
        return f"{url!r} is not a URL ({e})"
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in url):
        return f"expected an https:// URL, got {url!r}"
    if parts.username is not None or parts.password is not None:
        return f"{parts.hostname}: a URL with user:password@ is not accepted; name the credential in headers"
    if parts.scheme == "http" and parts.hostname not in LOOPBACK:
        return (
            f"plain http:// is accepted for a loopback host only (localhost, 127.0.0.1, ::1), "
            f"not {parts.hostname}: use https://"
        )
    return None


def header_problem(header: str) -> str | None:
    """What is wrong with a header's name, or None."""
    if not _HEADER.match(header):
        return f"{header!r} is not a header name"
    if header.lower() in RESERVED_HEADERS:
        return f"{header} is set by the governor's MCP client itself"
    return None


@dataclass(frozen=True, slots=True)
class CallPattern:
    """One rule entry: ``server.name`` globs, and argument globs."""

    text: str
    args: tuple[tuple[str, str], ...] = ()
    _server: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _name: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _folded: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        server, _, name = self.text.partition(".")
        object.__setattr__(self, "_server", re.compile(fnmatch.translate(server)))
        object.__setattr__(self, "_name", re.compile(fnmatch.translate(name), re.DOTALL))
        folded = re.compile(fnmatch.translate(name), re.DOTALL | re.IGNORECASE)
        object.__setattr__(self, "_folded", folded)

    def matches(
        self, server: str, name: str, arguments: Mapping[str, Any], *, fold: bool = False
    ) -> bool:
        """Whether the call ``server.name`` with these arguments matches; with
        ``fold`` the name's half regardless of case (a deny or ask rule: a server
        whose dispatch ignores case must not take ``Git_Commit`` for another tool)."""
        names = self._folded if fold else self._name
        if self._server.match(server) is None or names.match(name) is None:
            return False
        for key, glob in self.args:
            if key not in arguments:
                return False
            text = argument_text(arguments[key])
            said = path_spellings(text) if fold and isinstance(arguments[key], str) else (text,)
            if not any(fnmatch.fnmatchcase(t, glob) for t in said):
                return False
        return True

    def __str__(self) -> str:
        if not self.args:
            return self.text
        return f"{self.text} ({', '.join(f'{k}={v}' for k, v in self.args)})"


def path_spellings(text: str) -> tuple[str, ...]:
    """A string argument as a path may be spelt: as given, normalized
    (``sub/../a`` is ``a``, ``/w//a`` is ``/w/a``), and a relative one as
    ``./`` it (so that ``*/private.txt`` holds for ``private.txt``). A deny or
    ask argument glob matches any of them: a server resolves each to the same file."""
    found = [text]
    if text:
        found.append(posixpath.normpath(text))
    found += [f"./{t}" for t in list(found) if t and not t.startswith(("/", "./"))]
    return tuple(dict.fromkeys(found))


def argument_text(value: Any) -> str:
    """An argument as an argument glob reads it: a string as is, else compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


@dataclass(frozen=True, slots=True)
class McpTier:
    """The patterns of one tier, by subject."""

    tools: tuple[CallPattern, ...] = ()
    prompts: tuple[CallPattern, ...] = ()
    resources: tuple[CallPattern, ...] = ()

    def first(
        self, subject: str, server: str, name: str, arguments: Mapping[str, Any], *, fold: bool = False
    ) -> CallPattern | None:
        """The first pattern of ``subject`` matching the call, or None (``fold``:
        see `CallPattern.matches`)."""
        patterns: tuple[CallPattern, ...] = getattr(self, subject)
        return next((p for p in patterns if p.matches(server, name, arguments, fold=fold)), None)


@dataclass(frozen=True, slots=True)
class McpConfig:
    """A job's ``[mcp]``: its servers and the three tiers."""

    servers: tuple[McpServer, ...] = ()
    deny: McpTier = field(default_factory=McpTier)
    ask: McpTier = field(default_factory=McpTier)
    allow: McpTier = field(default_factory=McpTier)
    governor_tools: bool = False
    """Whether the agent is offered the governor's own tools (`OWN_SERVER`)."""

    def server(self, name: str) -> McpServer | None:
        """The server named ``name``, or None."""
        return next((s for s in self.servers if s.name == name), None)

    def tiers(self) -> tuple[tuple[Verdict, McpTier], ...]:
        """(verdict, tier) from the strongest to the weakest."""
        return ((Verdict.DENY, self.deny), (Verdict.ASK, self.ask), (Verdict.ALLOW, self.allow))


@dataclass(frozen=True, slots=True)
class McpCall:
    """One governed MCP request of the agent's: ``tools/call`` (``name`` the
    tool), ``prompts/get`` (the prompt) or ``resources/read`` (the URI)."""

    server: str
    method: McpMethod
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class McpVerdict:
    """What `decide_mcp` found, in the shape `governor.policies.decide.Decision` takes."""

    verdict: Verdict
    rule: str
    reason: str
    by: str = who.CAPABILITY


_VERB: Final = {Verdict.ALLOW: "allows", Verdict.ASK: "asks about", Verdict.DENY: "refuses"}
_WHAT: Final = {"tools": "tool", "prompts": "prompt", "resources": "resource"}


def decide_mcp(call: McpCall, config: McpConfig, capability: Capability) -> McpVerdict:
    """The engine's word on one call (see the module docstring)."""
    subject = SUBJECTS[call.method]
    what = _WHAT[subject]
    shown = f"{call.server}.{_clip(call.name)}"
    if config.server(call.server) is None:
        return McpVerdict(
            Verdict.DENY,
            "boundary: mcp servers",
            f"the MCP server {call.server!r} is not one this job names",
            who.CAPABILITY,
        )
    if subject == "tools" and not TOOL_NAME.match(call.name):
        return McpVerdict(
            Verdict.DENY,
            "mcp.tool-name",
            f"the MCP tool name {call.server}.{_clip(call.name)!r} is not one MCP allows "
            "(1-128 of A-Z, a-z, 0-9, _, - and .): a lookalike of another tool's, or text for a terminal",
            who.PROTOCOL,
        )
    # a resource's URI as the server may read it too (dot segments, escapes): for deny and ask
    spellings: tuple[str, ...] = (call.name,)
    if subject == "resources":
        spellings += tuple(u for u in uri_spellings(call.name) if u != call.name)
    for verdict, tier in config.tiers():
        # deny and ask regardless of case, allow exactly: a variant is refused or asked, never let through
        strict = verdict is not Verdict.ALLOW
        hit = next(
            (
                found
                for name in (spellings if strict else spellings[:1])
                if (found := tier.first(subject, call.server, name, call.arguments, fold=strict)) is not None
            ),
            None,
        )
        if hit is not None:
            return McpVerdict(
                verdict,
                f"mcp.{verdict}: {hit}",
                f"the MCP {what} {shown} matches the {verdict} rule `{hit}`",
                who.RULE,
            )
    default = MCP_DEFAULTS[subject][capability]
    return McpVerdict(
        default,
        f"capability: {capability}",
        f"{capability} {_VERB[default]} an MCP {what} no rule names ({shown})",
    )


def uri_spellings(uri: str) -> tuple[str, ...]:
    """``uri`` as a server's URL parser may read it: escapes decoded and dot
    segments removed, empty segments kept (as WHATWG URL does) or dropped
    (``demo://r/x/../doc/a.md`` is ``demo://r/doc/a.md``). A deny or ask rule
    matches these spellings too, so that another spelling of a denied
    resource is no way around it."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return ()
    authority, slash, path = rest.partition("/")
    cut = min((i for i in (path.find("?"), path.find("#")) if i >= 0), default=len(path))
    path, tail = unquote(path[:cut]), path[cut:]
    found = []
    for keep_empty in (True, False):
        parts: list[str] = []
        for part in path.split("/"):
            if part == "." or (part == "" and not keep_empty):
                continue
            if part == "..":
                if parts:
                    parts.pop()
                continue
            parts.append(part)
        found.append(f"{scheme}://{authority}{slash}{'/'.join(parts)}{tail}")
    return tuple(dict.fromkeys(found))


def _clip(text: str, limit: int = 200) -> str:
    return clipped(text, limit)


# -- the policy file ---------------------------------------------------------------------


def mcp_from_mapping(source: str, value: Any, capability: Capability) -> McpConfig:
    """``[mcp]`` of a policy file, or a `ConfigError` naming the file and key.
    ``capability`` is the job's (a writable server needs edit-workspace)."""
    body = table(source, "mcp", value)
    for key in body:
        if key not in _MCP_KEYS:
            raise unknown_key(source, "mcp", key, _MCP_KEYS)
    raw = body.get("servers", [])
    if not isinstance(raw, list):
        raise ConfigError(
            source, "mcp.servers", f"expected an array of tables ([[mcp.servers]]), got {type_name(raw)}"
        )
    if len(raw) > MAX_SERVERS:
        raise ConfigError(
            source, "mcp.servers", f"{len(raw)} servers; at most {MAX_SERVERS} are accepted"
        )
    servers: list[McpServer] = []
    for i, entry in enumerate(raw):
        server = _server(source, f"mcp.servers[{i}]", entry, capability)
        if any(s.name == server.name for s in servers):
            raise ConfigError(
                source, f"mcp.servers[{i}].name", f"{server.name!r} is named twice"
            )
        servers.append(server)
    governor_tools = boolean(source, "mcp.governor_tools", body.get("governor_tools", False))
    if governor_tools and any(s.name == OWN_SERVER for s in servers):
        i = next(i for i, s in enumerate(servers) if s.name == OWN_SERVER)
        raise ConfigError(
            source,
            f"mcp.servers[{i}].name",
            f"{OWN_SERVER!r} is the name of the governor's own tools (mcp.governor_tools): "
            "give this server another name",
        )
    tiers = {
        tier: _tier(source, f"mcp.{tier}", body.get(tier, {})) for tier in ("deny", "ask", "allow")
    }
    return McpConfig(servers=tuple(servers), governor_tools=governor_tools, **tiers)


def _server(source: str, key: str, value: Any, capability: Capability) -> McpServer:
    body = table(source, key, value)
    for field_name in body:
        if field_name not in _SERVER_KEYS:
            raise unknown_key(source, key, field_name, _SERVER_KEYS)
    name = body.get("name")
    if not isinstance(name, str) or not SERVER_NAME.match(name):
        raise ConfigError(
            source, f"{key}.name", f"expected 1-64 letters, digits, - or _, got {name!r}"
        )
    command = string_list(source, f"{key}.command", body.get("command", []))
    url = body.get("url")
    if url is not None:
        if not isinstance(url, str):
            raise ConfigError(source, f"{key}.url", f"expected an https:// URL, got {type_name(url)}")
        if wrong := url_problem(url):
            raise ConfigError(source, f"{key}.url", wrong)
    if bool(command) == (url is not None):
        raise ConfigError(source, key, f"server {name}: give a command or a url, exactly one")
    if url is not None:
        for only in _COMMAND_ONLY:
            if only in body:
                raise ConfigError(
                    source, f"{key}.{only}",
                    f"server {name} is reached at its url, not run in a sandbox: {only} is a command server's",
                )
    elif "headers" in body:
        raise ConfigError(source, f"{key}.headers", f"server {name}: headers are an HTTP server's (a url)")
    headers: list[tuple[str, str]] = []
    for header, variable in table(source, f"{key}.headers", body.get("headers", {})).items():
        if wrong := header_problem(header):
            raise ConfigError(source, f"{key}.headers", wrong)
        if not isinstance(variable, str) or not _VARIABLE.match(variable):
            raise ConfigError(
                source, f"{key}.headers.{header}",
                "expected the name of a variable holding the header's value "
                "(a name, never the value itself: that is not echoed here)",
            )
        headers.append((header, variable))
    if command and not command[0]:
        raise ConfigError(source, f"{key}.command", "the program is empty")
    env = string_list(source, f"{key}.env", body.get("env", []))
    for variable in env:
        if not _VARIABLE.match(variable):
            raise ConfigError(
                source, f"{key}.env", f"{variable!r} is not a variable name (names only, no values)"
            )
    writable = boolean(source, f"{key}.writable", body.get("writable", False))
    if writable and capability is Capability.READ_ONLY:
        raise ConfigError(
            source, f"{key}.writable", "a writable server needs edit-workspace; this job is read-only"
        )
    network: list[HostPattern] = []
    for text in string_list(source, f"{key}.network", body.get("network", [])):
        try:
            network.append(parse_pattern(text))
        except HostPatternError as e:
            raise ConfigError(source, f"{key}.network", str(e)) from None
    timeout = body.get("timeout", CALL_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigError(
            source, f"{key}.timeout", f"expected a number of seconds above 0, got {timeout!r}"
        )
    return McpServer(
        name=name,
        command=command,
        url=url,
        headers=tuple(headers),
        env=env,
        writable=writable,
        network=tuple(network),
        timeout=float(timeout),
    )


def _tier(source: str, key: str, value: Any) -> McpTier:
    body = table(source, key, value)
    for name in body:
        if name not in _RULE_KEYS:
            raise unknown_key(source, key, name, _RULE_KEYS)
    lists: dict[str, tuple[CallPattern, ...]] = {}
    for subject in _RULE_KEYS:
        raw = body.get(subject, [])
        if not isinstance(raw, list):
            raise ConfigError(source, f"{key}.{subject}", f"expected an array, got {type_name(raw)}")
        lists[subject] = tuple(
            _pattern(source, f"{key}.{subject}[{i}]", entry, args=subject == "tools")
            for i, entry in enumerate(raw)
        )
    return McpTier(**lists)


def _pattern(source: str, key: str, entry: Any, *, args: bool) -> CallPattern:
    if isinstance(entry, str):
        return _call_pattern(source, key, entry, ())
    if not args or not isinstance(entry, dict):
        accepted = "a \"server.name\" string" + (" or { tool, args } table" if args else "")
        raise ConfigError(source, key, f"expected {accepted}, got {type_name(entry)}")
    for name in entry:
        if name not in _ENTRY_KEYS:
            raise unknown_key(source, key, name, _ENTRY_KEYS)
    text = entry.get("tool")
    if not isinstance(text, str):
        raise ConfigError(source, f"{key}.tool", f"expected a \"server.tool\" string, got {type_name(text)}")
    globs = table(source, f"{key}.args", entry.get("args", {}))
    for name, glob in globs.items():
        if not isinstance(glob, str):
            raise ConfigError(source, f"{key}.args.{name}", f"expected a glob string, got {type_name(glob)}")
    return _call_pattern(source, key, text, tuple(sorted(globs.items())))


def _call_pattern(source: str, key: str, text: str, args: tuple[tuple[str, str], ...]) -> CallPattern:
    server, dot, name = text.partition(".")
    if not dot or not server or not name:
        raise ConfigError(
            source, key, f"{text!r} is not a pattern: write server.name (globs allowed, e.g. git.*)"
        )
    return CallPattern(text, args)
