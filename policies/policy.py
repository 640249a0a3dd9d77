"""The job-owned policy: capability, roots, network, env names, on-ask, rules.

A policy file is TOML and strict: an unknown key, a wrong type or a bad value is
a `ConfigError` naming the file, the key and the accepted values (with the
closest key suggested for a typo). The format, every key::

    capability = "edit-workspace"     # read-only | edit-workspace | full-access
    extra_dirs = ["../shared-lib"]    # more roots besides the workspace
    network = false                   # network for the commands (true: on, no host allowed)
    env = ["CI"]                      # names of variables passed to commands
    on_ask = "refuse"                 # refuse | pause | person
    allow_mode_switch = false         # may the agent be put in a mode where it stops asking
    protected = ["specs/**"]          # more globs no governed write may touch
    unprotect = [".pre-commit-config.yaml"]  # protected names this job may change (hook and editor configs only)
    hidden = ["**/.env", "**/.env.*"] # globs no governed read may see (this replaces the default)

    [sandbox]
    keep = ["~/tools", "/opt/sdk"]    # more folders kept visible, read-only (absolute or ~/)
    toolchains = true                 # keep the toolchains under $HOME that PATH leads to
    git = "commit"                    # commit | read-only: may commands and the agent commit
    frozen = ["tests/acceptance/**"]  # read-only to the agent and every command for the attempt
    held_out = ["tests/hidden/**"]    # absent from every sandbox of the attempt, back for the checks

    [checks]                          # run after the attempt, each in a fresh sandbox
    commands = ["pytest -q"]          # shell lines; network off, the workspace unchangeable
    timeout = 600                     # seconds for each check (default 600)
    acceptance = ["tests/acceptance/test_api.py::test_get"]  # the tests that must pass (default: the frozen set's)
    harness = "frozen"                # frozen | audited: the harness set read-only, or only its changes found
    harness_add = ["ci/**"]           # more globs in the harness set
    harness_except = ["pyproject.toml"]  # globs of the default harness set this job may change

    [limits]                          # one attempt's resources (governor.policies.limits; defaults there)
    memory = "4G"                     # per process
    processes = 1024                  # per sandbox (threads count)
    tmp = "1G"                        # each private tmpfs: /tmp, /var/tmp, the empty homes
    cpu_seconds = 1800                # per process
    wall = 1800                       # the attempt's timeout (--timeout wins)
    [[mcp.servers]]                   # MCP servers behind the governor (governor.policies.mcp)
    name = "git"
    command = ["mcp-server-git"]
    [mcp.deny]                        # [mcp.ask], [mcp.allow]: server.name globs
    tools = ["git.git_commit"]
    [network]                         # instead of `network`: on, with these hosts only
    allow = ["pypi.org", "*.npmjs.org:443", "127.0.0.1:8080"]   # ask, deny: the same

    [deny]                            # [ask] and [allow] take the same keys
    commands = ["rm *", "git push *"]
    paths = ["secrets/**"]            # reads and writes
    writes = ["*.lock"]               # writes only
    tools = ["fetch"]                 # ACP tool kinds

A loaded policy is not yet bound to a workspace; `Policy.bind` gives it its
absolute roots (resolved by the caller, who owns the file system).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from governor.policies.capability import Capability, CapabilityError
from governor.policies.config_values import boolean, string_list, table, type_name
from governor.policies.errors import ConfigError, ConfigErrors, closest, toml_error, unknown_key
from governor.policies.limits import Limits, limits_from_mapping
from governor.policies.mcp import McpConfig, mcp_from_mapping
from governor.policies.network import HostPattern, HostPatternError, NetworkRules, parse_pattern
from governor.policies.paths import PathGlobs, normalize
from governor.policies.protected import HIDDEN_BY_DEFAULT, UNPROTECTABLE, protected_globs
from governor.policies.rules import TOOL_KINDS, RuleList, Rules, rule_list

OnAsk = Literal["refuse", "pause", "person"]
ON_ASK: Final = ("refuse", "pause", "person")
GitAccess = Literal["commit", "read-only"]
GIT_ACCESS: Final = ("commit", "read-only")
HarnessMode = Literal["frozen", "audited"]
HARNESS_MODES: Final = ("frozen", "audited")
"""``[checks] harness``: the harness set (`governor.policies.harness`) pinned
read-only, or only its changes found. Here, not in `harness`, which reads a
`Policy` and so sits above this file."""
"""``[sandbox] git``: at edit-workspace a sandboxed command or agent may commit
(the parts of ``.git`` that run code stay read-only), or ``.git`` is read-only
as a whole for a job that must not commit. Governed writes (``fs/*``) under
``.git`` are refused either way."""

_TOP_KEYS: Final = {
    "capability",
    "extra_dirs",
    "network",
    "env",
    "on_ask",
    "allow_mode_switch",
    "protected",
    "unprotect",
    "hidden",
    "allow",
    "ask",
    "deny",
    "sandbox",
    "limits",
    "checks",
    "mcp",
}
_RULE_KEYS: Final = {"commands", "paths", "writes", "tools"}
_SANDBOX_KEYS: Final = {"git", "keep", "toolchains", "frozen", "held_out"}
_NETWORK_KEYS: Final = {"allow", "ask", "deny"}
_CHECKS_KEYS: Final = {
    "commands",
    "timeout",
    "acceptance",
    "harness",
    "harness_add",
    "harness_except",
}
CHECK_TIMEOUT: Final = 600.0
"""Seconds one check may run by default: a hung test suite ends as a failed check."""
MAX_CHECKS: Final = 64
"""Checks a job may name: each is a sandbox of its own after the attempt."""


@dataclass(frozen=True, slots=True)
class Policy:
    """What a job asks for. Least authority by default: read-only, no network,
    no env, refuse on ask, no mode switches."""

    capability: Capability = Capability.READ_ONLY
    extra_dirs: tuple[str, ...] = ()
    network: bool = False
    network_rules: NetworkRules = field(default_factory=NetworkRules)
    """The ``[network]`` allow/ask/deny host patterns (`governor.policies.network`)."""
    env: tuple[str, ...] = ()
    on_ask: OnAsk = "refuse"
    allow_mode_switch: bool = False
    rules: Rules = field(default_factory=Rules)
    protected_extra: tuple[str, ...] = ()
    unprotected: tuple[str, ...] = ()
    """Names of `governor.policies.protected.UNPROTECTABLE` this job may change (``unprotect``);
    a glob of ``protected_extra`` (the ceiling's included) still covers them."""
    ceiling_protected: tuple[str, ...] = field(default=(), compare=False)
    """The globs of ``protected_extra`` the operator's ceiling added (`bind`): a
    write they refuse is the ceiling's word (``by`` ``ceiling``), not the job's.
    Not part of the policy's identity: ``protected_extra`` holds them already."""
    masked: tuple[str, ...] = ()
    """Host files (absolute) masked in every sandbox of the job: the operator's,
    from the ceiling (its audit signing key), never a job's own; a folder here
    is empty inside (a batch job's source repository)."""
    hidden_globs: tuple[str, ...] = HIDDEN_BY_DEFAULT
    keep: tuple[str, ...] = ()
    """Folders kept visible read-only in every sandbox, as written (``~/`` expanded
    by the caller)."""
    toolchains: bool = True
    """Whether the sandboxes keep the toolchains under the homes (`governor.sandbox.host.toolchains`)."""
    git: GitAccess = "commit"
    frozen_globs: tuple[str, ...] = ()
    """``[sandbox] frozen``: globs relative to each root, read-only to the agent
    and every command for the whole attempt (a loop's acceptance tests, written
    before it), every governed write to them refused."""
    held_out_globs: tuple[str, ...] = ()
    """``[sandbox] held_out`` (and ``--held-out``): globs relative to the
    workspace naming tests the agent never sees: moved out of the workspace
    before the agent starts, put back only for the checks (`governor.checks.held_out`)."""
    checks: tuple[str, ...] = ()
    """``[checks] commands``: shell lines run after the attempt, each in a fresh
    sandbox over the workspace as the attempt left it (`governor.checks.check_runs`); the
    outcome's verdict is theirs."""
    check_timeout: float = CHECK_TIMEOUT
    """``[checks] timeout``: seconds for each check."""
    acceptance: tuple[str, ...] | None = None
    """``[checks] acceptance``: the tests the verdict needs passed (``path::Class::test``,
    ``path::test name``); None (not given): the tests in the frozen files; empty
    (``acceptance = []``): none by name, the checks' exit status is the verdict
    (`governor.checks.test_results`). Held-out tests are acceptance tests whatever it says."""
    harness: HarnessMode = "frozen"
    """``[checks] harness``: the harness set (`governor.policies.harness`) pinned read-only
    for the attempt (``frozen``) or only its changes found (``audited``)."""
    harness_add: tuple[str, ...] = ()
    """``[checks] harness_add``: globs of more paths in the harness set."""
    harness_except: tuple[str, ...] = ()
    """``[checks] harness_except``: globs the default harness set's paths may
    match to leave it (a job whose agent must change its ``pyproject.toml``)."""
    harness_named: tuple[str, ...] = ()
    """Absolute paths in the roots the checks run as programs (a script, a
    virtualenv's interpreter: the whole virtualenv), found by the caller who
    owns the file system (`governor.confine.harness.named`); in the harness set."""
    harness_paths: tuple[str, ...] = ()
    """Absolute folders in the roots on the checks' module path (the job's
    ``PYTHONPATH`` or ``NODE_PATH``, found by `governor.confine.harness.with_named`):
    a module in one named like the runner or the standard library is in the
    harness set, as at a root."""
    limits: Limits = field(default_factory=Limits)
    """The ``[limits]`` as written (unset ones None: `Limits.effective` fills them)."""
    mcp: McpConfig = field(default_factory=McpConfig)
    """The ``[mcp]`` servers and rules (`governor.policies.mcp`)."""
    roots: tuple[str, ...] = ()
    """Absolute roots, the workspace first; empty until `bind`."""
    source: str = field(default="built-in", compare=False)
    protected: PathGlobs = field(init=False, compare=False, repr=False)
    hidden: PathGlobs = field(init=False, compare=False, repr=False)
    frozen: PathGlobs = field(init=False, compare=False, repr=False)
    held_out: PathGlobs = field(init=False, compare=False, repr=False)
    harness_added: PathGlobs = field(init=False, compare=False, repr=False)
    harness_excepted: PathGlobs = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "protected",
            PathGlobs(protected_globs(self.unprotected) + tuple(self.protected_extra)),
        )
        object.__setattr__(self, "hidden", PathGlobs(tuple(self.hidden_globs)))
        object.__setattr__(self, "frozen", PathGlobs(tuple(self.frozen_globs)))
        object.__setattr__(self, "held_out", PathGlobs(tuple(self.held_out_globs)))
        object.__setattr__(self, "harness_added", PathGlobs(tuple(self.harness_add)))
        object.__setattr__(self, "harness_excepted", PathGlobs(tuple(self.harness_except)))

    @property
    def workspace(self) -> str:
        """The first root: where the agent's session lives."""
        if not self.roots:
            raise ValueError("this policy is not bound to a workspace yet (Policy.bind)")
        return self.roots[0]

    def bind(
        self,
        workspace: str,
        extra_dirs: tuple[str, ...] | None = None,
        *,
        protected: tuple[str, ...] = (),
        masked: tuple[str, ...] = (),
    ) -> Policy:
        """This policy with absolute roots: the workspace, then the extra dirs
        (the policy's own, taken against the workspace, unless others are given),
        and the ceiling's extra protected globs added."""
        if not workspace.startswith("/"):
            raise ValueError(f"the workspace must be an absolute path, got {workspace!r}")
        ws = normalize(workspace)
        dirs = self.extra_dirs if extra_dirs is None else extra_dirs
        roots = (ws, *(normalize(d, ws) for d in dirs if normalize(d, ws) != ws))
        return replace(
            self,
            roots=tuple(dict.fromkeys(roots)),
            protected_extra=tuple(dict.fromkeys(self.protected_extra + protected)),
            ceiling_protected=tuple(dict.fromkeys(self.ceiling_protected + protected)),
            masked=tuple(dict.fromkeys(self.masked + masked)),
        )


def parse_policy(text: str, source: str = "policy.toml") -> Policy:
    """A policy from TOML text, strictly validated."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise toml_error(source, text, e) from None
    return policy_from_mapping(data, source)


def policy_from_mapping(data: Mapping[str, Any], source: str) -> Policy:
    """A policy from already-parsed TOML (a policy may be embedded in another file).

    Every key is judged even after one is wrong: several problems are one
    `ConfigErrors`, so a file is fixed in one round, not one error at a time."""
    errors: list[ConfigError] = []
    errors.extend(unknown_key(source, "", key, _TOP_KEYS) for key in data if key not in _TOP_KEYS)
    kwargs: dict[str, Any] = {"source": source}
    for key in [*data, *(tier for tier in _TIERS if tier not in data)]:  # the file's order
        if key not in _TOP_KEYS:
            continue
        try:
            _read_key(source, key, data, kwargs)
        except ConfigError as e:
            errors.append(e)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigErrors(errors)
    kwargs["rules"] = Rules(**{tier: kwargs.pop(tier) for tier in _TIERS})
    return Policy(**kwargs)


_TIERS: Final = ("deny", "ask", "allow")


def _read_key(source: str, key: str, data: Mapping[str, Any], kwargs: dict[str, Any]) -> None:
    """Validate the top-level `key` of a policy into `kwargs`, or a `ConfigError`."""
    value = data.get(key)
    if key == "capability":
        if not isinstance(value, str):
            raise ConfigError(source, "capability", f"expected a string, got {type_name(value)}")
        try:
            kwargs["capability"] = Capability.parse(value)
        except CapabilityError as e:
            raise ConfigError(source, "capability", str(e)) from None
    elif key == "extra_dirs":
        kwargs["extra_dirs"] = string_list(source, "extra_dirs", value)
    elif key == "network":
        kwargs.update(_network(source, value))
    elif key == "env":
        names = string_list(source, "env", value)
        for name in names:
            if not name or "=" in name or not name.replace("_", "a").isalnum():
                raise ConfigError(
                    source, "env", f"{name!r} is not a variable name (names only, no values)"
                )
        kwargs["env"] = names
    elif key == "on_ask":
        if value not in ON_ASK:
            raise ConfigError(
                source, "on_ask", f"{value!r} is not accepted (accepted: {', '.join(ON_ASK)})"
            )
        kwargs["on_ask"] = value
    elif key == "allow_mode_switch":
        kwargs["allow_mode_switch"] = boolean(source, "allow_mode_switch", value)
    elif key == "protected":
        kwargs["protected_extra"] = string_list(source, "protected", value)
    elif key == "unprotect":
        kwargs["unprotected"] = _unprotected(source, value)
    elif key == "hidden":
        kwargs["hidden_globs"] = string_list(source, "hidden", value)
    elif key == "sandbox":
        kwargs.update(_sandbox(source, value))
    elif key == "checks":
        kwargs.update(_checks(source, value))
    elif key == "limits":
        kwargs["limits"] = limits_from_mapping(source, "limits", table(source, "limits", value))
    elif key == "mcp":
        kwargs["mcp"] = mcp_from_mapping(source, value, _capability_of(data))
    elif key in _TIERS:
        kwargs[key] = _tier(source, key, value)


def _capability_of(data: Mapping[str, Any]) -> Capability:
    """The file's capability as far as another key needs it (a bad one is its
    own key's error): read-only when unset or unreadable."""
    value = data.get("capability")
    try:
        return Capability.parse(value) if isinstance(value, str) else Capability.READ_ONLY
    except CapabilityError:
        return Capability.READ_ONLY


def _unprotected(source: str, value: Any) -> tuple[str, ...]:
    """``unprotect``: names of `UNPROTECTABLE`, as the list writes them; any
    other (git's internals, the agent's and the governor's controls, rc files)
    is an error naming it: a policy may come from the repository the agent
    works in."""
    names = string_list(source, "unprotect", value)
    for name in names:
        if name not in UNPROTECTABLE:
            hint = closest(name, UNPROTECTABLE)
            raise ConfigError(
                source,
                "unprotect",
                f"{name!r} cannot be unprotected: only the hook managers' and editors' "
                f"configs can (see docs/policies.md#protected-paths)" + (f"; did you mean {hint!r}?" if hint else ""),
            )
    return names


def _network(source: str, value: Any) -> dict[str, Any]:
    """``network = true|false``, or a ``[network]`` table of host patterns
    (network on, with exactly those hosts)."""
    if not isinstance(value, dict):
        on = boolean(source, "network", value)
        return {"network": on, "network_rules": NetworkRules(enabled=on)}
    body = table(source, "network", value)
    for key in body:
        if key not in _NETWORK_KEYS:
            raise unknown_key(source, "network", key, _NETWORK_KEYS)
    tiers: dict[str, tuple[HostPattern, ...]] = {}
    for key in ("allow", "ask", "deny"):
        patterns = []
        for text in string_list(source, f"network.{key}", body.get(key, [])):
            try:
                patterns.append(parse_pattern(text))
            except HostPatternError as e:
                raise ConfigError(source, f"network.{key}", str(e)) from None
        tiers[key] = tuple(patterns)
    return {"network": True, "network_rules": NetworkRules(enabled=True, **tiers)}


def _sandbox(source: str, value: Any) -> dict[str, Any]:
    body = table(source, "sandbox", value)
    for key in body:
        if key not in _SANDBOX_KEYS:
            raise unknown_key(source, "sandbox", key, _SANDBOX_KEYS)
    out: dict[str, Any] = {}
    if "keep" in body:
        keep = string_list(source, "sandbox.keep", body["keep"])
        for folder in keep:
            if not (folder.startswith("/") or folder.startswith("~/")):
                raise ConfigError(
                    source, "sandbox.keep", f"{folder!r} must be absolute or start with ~/"
                )
        out["keep"] = keep
    if "toolchains" in body:
        out["toolchains"] = boolean(source, "governor.sandbox.host.toolchains", body["toolchains"])
    if "frozen" in body:
        out["frozen_globs"] = _frozen(source, string_list(source, "sandbox.frozen", body["frozen"]))
    if "held_out" in body:
        key = "sandbox.held_out"
        out["held_out_globs"] = _frozen(source, string_list(source, key, body["held_out"]), key)
    if "git" in body:
        git = body["git"]
        if git not in GIT_ACCESS:
            raise ConfigError(
                source,
                "sandbox.git",
                f"{git!r} is not accepted (accepted: {', '.join(GIT_ACCESS)})",
            )
        out["git"] = git
    return out


def _checks(source: str, value: Any) -> dict[str, Any]:
    body = table(source, "checks", value)
    for key in body:
        if key not in _CHECKS_KEYS:
            raise unknown_key(source, "checks", key, _CHECKS_KEYS)
    out: dict[str, Any] = {}
    if "commands" in body:
        out["checks"] = check_commands(source, "checks.commands", body["commands"])
    if "timeout" in body:
        timeout = body["timeout"]
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ConfigError(
                source, "checks.timeout", f"expected a number of seconds above 0, got {timeout!r}"
            )
        out["check_timeout"] = float(timeout)
    if "acceptance" in body:
        names = string_list(source, "checks.acceptance", body["acceptance"])
        for name in names:
            if not name.strip() or "\0" in name:
                raise ConfigError(source, "checks.acceptance", "a test must be named (path::name)")
        out["acceptance"] = names
    if "harness" in body:
        mode = body["harness"]
        if mode not in HARNESS_MODES:
            raise ConfigError(
                source,
                "checks.harness",
                f"{mode!r} is not accepted (accepted: {', '.join(HARNESS_MODES)})",
            )
        out["harness"] = mode
    for key in ("harness_add", "harness_except"):
        if key in body:
            named = string_list(source, f"checks.{key}", body[key])
            globs = _frozen(source, named, f"checks.{key}", whole=key == "harness_except")
            out[key] = globs
    return out


def check_commands(source: str, key: str, value: Any) -> tuple[str, ...]:
    """Check commands as a job gives them (a policy, a batch job, ``--check``):
    non-empty shell lines without NUL, at most `MAX_CHECKS`."""
    commands = string_list(source, key, value)
    if len(commands) > MAX_CHECKS:
        raise ConfigError(
            source, key, f"{len(commands)} checks; at most {MAX_CHECKS} are accepted"
        )
    for i, command in enumerate(commands):
        if not command.strip() or "\0" in command:
            raise ConfigError(
                source, key, f"check {i + 1} must be a non-empty shell line without NUL"
            )
    return commands


MAX_FROZEN: Final = 256
"""Frozen globs a policy may name: each is matched against every path the
workspace walk meets, and each existing path it names is a bind in every sandbox."""


def inside_globs(source: str, key: str, value: Any) -> tuple[str, ...]:
    """Globs as a job gives them for its frozen or held-out paths (a policy, a
    batch job, ``--held-out``): strings relative to the roots, inside them, at
    most `MAX_FROZEN`; a `ConfigError` naming ``key`` otherwise."""
    return _frozen(source, string_list(source, key, value), key)


def _frozen(
    source: str, globs: tuple[str, ...], key: str = "sandbox.frozen", *, whole: bool = False
) -> tuple[str, ...]:
    """Frozen (and held-out, ``key``) globs are relative to the roots and inside
    them: an absolute path, ``..`` or a glob that names a whole root would
    freeze what the capability already decides (read-only is a capability, not
    a frozen glob), or hold out the workspace itself (``whole`` lets a harness
    exception name every file)."""
    if len(globs) > MAX_FROZEN:
        raise ConfigError(source, key, f"{len(globs)} globs; at most {MAX_FROZEN} are accepted")
    for glob in globs:
        parts = glob.removeprefix("./").split("/")
        if not glob or glob.startswith(("/", "~")) or ".." in parts:
            raise ConfigError(
                source,
                key,
                f"{glob!r} must be relative to the roots and stay inside them (no /, ~ or ..)",
            )
        if not whole and all(p in ("", ".", "**") for p in parts):
            raise ConfigError(
                source,
                key,
                f"{glob!r} names a whole root; for a job that changes nothing use "
                'capability = "read-only"'
                if key == "sandbox.frozen"
                else f"{glob!r} names a whole root: hold out the tests' folders, not the workspace",
            )
    return globs


def _tier(source: str, name: str, value: Any) -> RuleList:
    if value is None:
        return RuleList()
    body = table(source, name, value)
    for key in body:
        if key not in _RULE_KEYS:
            raise unknown_key(source, name, key, _RULE_KEYS)
    tools = string_list(source, f"{name}.tools", body.get("tools", []))
    for kind in tools:
        if kind not in TOOL_KINDS:
            hint = closest(kind, TOOL_KINDS)
            suggestion = f"; did you mean `{hint}`?" if hint else ""
            raise ConfigError(
                source,
                f"{name}.tools",
                f"{kind!r} is not a tool kind{suggestion} (accepted: {', '.join(TOOL_KINDS)})",
            )
    commands = string_list(source, f"{name}.commands", body.get("commands", []))
    for command in commands:
        if not command.split():
            raise ConfigError(
                source, f"{name}.commands", "an empty command pattern matches nothing"
            )
    return rule_list(
        commands=commands,
        paths=string_list(source, f"{name}.paths", body.get("paths", [])),
        writes=string_list(source, f"{name}.writes", body.get("writes", [])),
        tools=tools,
    )
