"""`decide(action, policy) -> Decision`: the single decision point, pure and fast.

Everything that affects a verdict lives here, in this order:

1. The boundary, which no rule can widen: reads and writes outside the roots
   below full-access, any write at read-only, writes to protected paths, reads
   of hidden paths; then writes to the job's frozen and held-out paths (its own word, which
   its own ``allow`` rules do not undo). A job's policy may come from an untrusted repository, so its
   ``allow`` rules only ever act inside this boundary.
2. The rules: deny > ask > allow.
3. The capability's default (the `DEFAULTS` table).

A compound command is decided part by part and the strictest part wins; a line
the splitter does not fully understand is at least ``ask``, never ``allow``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from governor.policies import by as who
from governor.policies.actions import (
    Action,
    Connect,
    ReadFile,
    RunCommand,
    ToolPermission,
    WriteFile,
)
from governor.policies.capability import Capability
from governor.policies.errors import clipped
from governor.policies.harness import member as harness_member
from governor.policies.mcp import McpCall, decide_mcp
from governor.policies.network import decide_connect
from governor.policies.paths import normalize, within
from governor.policies.policy import Policy
from governor.policies.rules import Verdict
from governor.policies.shell import SimpleCommand, split, split_argv

ALLOW: Final = Verdict.ALLOW
ASK: Final = Verdict.ASK
DENY: Final = Verdict.DENY


@dataclass(frozen=True, slots=True)
class Decision:
    """A verdict, the rule that produced it and a plain-English reason.

    ``by`` is what decided, set here where it is decided (`governor.policies.by` defines
    the words): ``capability`` (its defaults), ``protected``, ``rule``,
    ``ceiling`` (a path the ceiling protects) or ``protocol`` (a request that
    cannot be carried out as asked). ``parts`` holds the
    decisions of a compound subject (each command of a line, each path of a tool
    call) when there is more than one.
    """

    verdict: Verdict
    rule: str
    reason: str
    by: str = who.CAPABILITY
    parts: tuple[Decision, ...] = ()
    failed: str | None = None
    """What happened to a request no rule refused (a name that does not
    resolve: ``dns``; the words are `governor.audit.tally.FAILURES`): set where the
    failure is found, never by the engine, so that the tally counts it apart
    from the policy's refusals."""

    @property
    def allowed(self) -> bool:
        """Whether the verdict is allow."""
        return self.verdict is ALLOW


# The capability's default when no rule matches, one row per subject.
DEFAULTS: Final[Mapping[str, Mapping[Capability, Verdict]]] = {
    "read": {
        Capability.READ_ONLY: ALLOW,
        Capability.EDIT_WORKSPACE: ALLOW,
        Capability.FULL_ACCESS: ALLOW,
    },
    "write": {
        Capability.READ_ONLY: DENY,
        Capability.EDIT_WORKSPACE: ALLOW,
        Capability.FULL_ACCESS: ALLOW,
    },
    "command": {
        Capability.READ_ONLY: ALLOW,
        Capability.EDIT_WORKSPACE: ALLOW,
        Capability.FULL_ACCESS: ALLOW,
    },
}

# A tool call whose raw input names no command and no path is judged by its kind.
KIND_DEFAULTS: Final[Mapping[str, Verdict]] = {
    "read": ALLOW,
    "search": ALLOW,
    "think": ALLOW,
    "switch_mode": ALLOW,
    "edit": ASK,
    "delete": ASK,
    "move": ASK,
    "execute": ASK,
    "other": ASK,
}

_WRITE_KINDS: Final = frozenset({"edit", "delete", "move"})
_PATH_KEYS: Final = (
    "file_path",
    "filePath",
    "path",
    "notebook_path",
    "abs_path",
    "absolute_path",
    "source",
    "destination",
    "old_path",
    "new_path",
    "target",
)
_PATH_LIST_KEYS: Final = ("paths", "files", "file_paths")
_COMMAND_KEYS: Final = ("command", "cmd")


def decide(action: Action, policy: Policy) -> Decision:
    """The decision for one action under a bound policy."""
    return _DECIDERS[type(action)](action, policy)


# -- files --------------------------------------------------------------------------


def decide_read(action: ReadFile, policy: Policy) -> Decision:
    """A governed read: inside the roots (below full-access), not hidden."""
    path = action.path
    if not path.startswith("/"):
        return Decision(
            DENY, "boundary: absolute paths", f"{path!r} is not an absolute path", who.PROTOCOL
        )
    path = normalize(path)
    roots = policy.roots
    if policy.capability < Capability.FULL_ACCESS and within(path, roots) is None:
        return Decision(
            DENY, "boundary: roots", f"{path} is outside the roots {', '.join(roots)}", who.CAPABILITY
        )
    hidden = policy.hidden.first(path, roots)
    if hidden is not None:
        return Decision(
            DENY, f"hidden: {hidden}", f"{path} is hidden from the agent ({hidden})", who.PROTECTED
        )
    for verdict, rules in policy.rules.path_tiers:
        hit = rules.paths.first(path, roots)
        if hit is not None:
            return _rule_hit(verdict, hit, "path", path)
    return _by_capability(policy, "read", path)


def decide_write(action: WriteFile, policy: Policy) -> Decision:
    """A governed write: edit-workspace or more, inside the roots, not protected."""
    path = action.path
    if not path.startswith("/"):
        return Decision(
            DENY, "boundary: absolute paths", f"{path!r} is not an absolute path", who.PROTOCOL
        )
    path = normalize(path)
    roots = policy.roots
    if policy.capability is Capability.READ_ONLY:
        return Decision(
            DENY,
            "capability: read-only",
            f"writing {path} needs edit-workspace; this job is read-only",
            who.CAPABILITY,
        )
    if policy.capability < Capability.FULL_ACCESS and within(path, roots) is None:
        return Decision(
            DENY, "boundary: roots", f"{path} is outside the roots {', '.join(roots)}", who.CAPABILITY
        )
    protected = policy.protected.first(path, roots)
    if protected is not None:
        mark = who.CEILING if protected in policy.ceiling_protected else who.PROTECTED
        return Decision(DENY, f"protected: {protected}", f"{path} is protected ({protected})", mark)
    frozen = policy.frozen.first(path, roots) if policy.frozen else None
    if frozen is not None:  # before the rules: the job froze it, no allow of its own thaws it
        return Decision(
            DENY, f"frozen: {frozen}", f"{path} is frozen for this attempt ({frozen})", who.PROTECTED
        )
    held = policy.held_out.first(path, roots) if policy.held_out else None
    if held is not None:  # the job's own tests, out of the agent's sight: not its to write
        return Decision(
            DENY, f"held-out: {held}", f"{path} is held out for this attempt ({held})", who.PROTECTED
        )
    harness = harness_member(policy, path) if policy.harness == "frozen" else None
    if harness is not None:  # the checks' harness is the loop's, as its frozen tests are
        return Decision(
            DENY,
            "harness: frozen",
            f"{path} decides what the checks run ({harness}): it is frozen for this attempt",
            who.PROTECTED,
        )
    for verdict, rules in policy.rules.write_tiers:
        hit = rules.paths.first(path, roots) or rules.writes.first(path, roots)
        if hit is not None:
            return _rule_hit(verdict, hit, "path", path)
    return _by_capability(policy, "write", path)


def _rule_hit(verdict: Verdict, hit: str, what: str, shown: str) -> Decision:
    return Decision(
        verdict,
        f"{verdict}: {hit}",
        f"the {what} {shown} matches the {verdict} rule `{hit}`",
        who.RULE,
    )


def _by_capability(policy: Policy, subject: str, shown: str) -> Decision:
    """No rule matched: the capability's default for the subject."""
    default = DEFAULTS[subject][policy.capability]
    return Decision(
        default,
        f"capability: {policy.capability}",
        f"{policy.capability} {_VERB[default]} a {subject} like {shown}",
    )


_VERB: Final = {ALLOW: "allows", ASK: "asks about", DENY: "refuses"}


# -- commands -----------------------------------------------------------------------


def decide_command(action: RunCommand, policy: Policy) -> Decision:
    """Every part of a command must pass; a line not fully understood is at least ask."""
    command = action.command
    shown = command if isinstance(command, str) else " ".join(command)
    parsed = split(command) if isinstance(command, str) else split_argv(command)
    cwd = normalize(action.cwd) if action.cwd else (policy.roots[0] if policy.roots else None)
    parts = [_decide_simple(c, policy, cwd) for c in parsed.commands]
    if parsed.unknown:
        parts.append(
            Decision(
                ASK,
                "unknown: shell",
                f"the governor cannot judge `{_clip(shown)}` safely: {'; '.join(parsed.unknown)}",
            )
        )
    if not parts:
        return Decision(ALLOW, f"capability: {policy.capability}", "an empty command does nothing")
    return _strictest(parts)


def _decide_simple(command: SimpleCommand, policy: Policy, cwd: str | None) -> Decision:
    argv = command.argv
    shown = " ".join(argv)
    subjects: list[Decision] = []
    for verdict, rules in policy.rules.tiers():
        hit = rules.command(argv)
        if hit is not None:
            subjects.append(
                Decision(
                    verdict,
                    f"{verdict}: {hit}",
                    f"`{_clip(shown)}` matches the {verdict} rule `{hit}`",
                    who.RULE,
                )
            )
            break
    else:
        default = DEFAULTS["command"][policy.capability]
        where = "in the sandbox" if policy.capability < Capability.FULL_ACCESS else "unsandboxed"
        subjects.append(
            Decision(
                default,
                f"capability: {policy.capability}",
                f"{policy.capability} {_VERB[default]} `{_clip(shown)}` ({where})",
            )
        )
    for target in command.writes:
        subjects.append(_redirect(target, cwd, policy, write=True))
    for source in command.reads:
        subjects.append(_redirect(source, cwd, policy, write=False))
    return _strictest(subjects)


def _redirect(target: str, cwd: str | None, policy: Policy, *, write: bool) -> Decision:
    if "$" in target or "`" in target or target.startswith("~"):
        return Decision(
            ASK,
            "unknown: redirect",
            f"the redirect target {target!r} is not known before the command runs",
        )
    path = normalize(target, cwd)
    if not path.startswith("/"):
        return Decision(
            ASK, "unknown: redirect", f"the redirect target {target!r} has no working directory"
        )
    if write:
        return decide_write(WriteFile(path), policy)
    # A command may read anything its sandbox shows; only hidden paths and
    # explicit path rules apply to what it reads through a redirect.
    hidden = policy.hidden.first(path, policy.roots)
    if hidden is not None:
        return Decision(
            DENY, f"hidden: {hidden}", f"{path} is hidden from the agent ({hidden})", who.PROTECTED
        )
    for verdict, rules in policy.rules.tiers():
        hit = rules.paths.first(path, policy.roots)
        if hit is not None:
            return _rule_hit(verdict, hit, "path", path)
    return Decision(
        ALLOW,
        f"capability: {policy.capability}",
        f"{policy.capability} allows reading {path} in the sandbox",
    )


# -- permission requests ------------------------------------------------------------


def decide_permission(action: ToolPermission, policy: Policy) -> Decision:
    """A tool call: its kind's rules, then every command and path its input names."""
    kind = action.kind or "other"
    relayed = _relayed(action, kind, policy)
    if relayed is not None:
        cwd = action.cwd or (policy.roots[0] if policy.roots else None)
        tool = _kind_rule(kind, policy)
        parts = [decide_call(relayed, policy), *_subjects(action, kind, cwd, policy)]
        return _strictest([*parts, tool] if tool is not None else parts)
    tool = _kind_rule(kind, policy)
    cwd = action.cwd or (policy.roots[0] if policy.roots else None)
    subjects = _subjects(action, kind, cwd, policy)
    if not subjects:
        if tool is not None:
            return tool
        default = KIND_DEFAULTS.get(kind, ASK)
        if kind == "fetch":
            default = ALLOW if policy.network else ASK
        what = f"`{_clip(action.title)}`" if action.title else "this tool call"
        return Decision(
            default,
            f"kind: {kind}",
            f"{what} is a {kind} tool call that names no command or path; {policy.capability} {_VERB[default]} it",
        )
    if tool is not None:
        subjects.insert(0, tool)
    return _strictest(subjects)


def _kind_rule(kind: str, policy: Policy) -> Decision | None:
    """The strictest rule naming the tool kind (``[deny] tools = ["execute"]``)."""
    for verdict, rules in policy.rules.tiers():
        if kind in rules.tools:
            return Decision(
                verdict,
                f"{verdict}: tool {kind}",
                f"the tool kind {kind} matches the {verdict} rule",
                who.RULE,
            )
    return None


_MCP_KINDS: Final = frozenset({"other", "read"})
"""The kinds agents give an MCP tool: ``other`` (Claude Code, Qwen Code), and
``read`` (Qwen Code, for a tool its server marks ``readOnlyHint``)."""


def _relayed(action: ToolPermission, kind: str, policy: Policy) -> McpCall | None:
    """The MCP call a permission asks about, when its title (Claude Code) or its
    tool name (Qwen Code's ``_meta.toolName``; its title is the arguments'
    JSON) names a tool of one of the job's servers the way agents name them,
    ``mcp__SERVER__TOOL``: the same ``[mcp]`` rules decide it as decide the call.

    What is trusted: nothing here. The title, the name, the kind and the input
    are all the agent's word, and the permission only lets the agent go on; an
    MCP call it then makes comes through the relay, which decides it again on
    the server, tool and arguments actually sent (and a server the job does not
    name is not reachable at all). So a name only puts the ``[mcp]`` rule's
    verdict in place of the kind's default (an ``other`` is asked about): the
    rule naming its kind and every command and path its input names still
    decide with it, the strictest wins, and a call allowed here is refused by
    the relay if the rules refuse what is really sent. Only kinds an MCP tool gets (`_MCP_KINDS`):
    an ``execute`` or ``edit`` named like an MCP tool is judged as what it is.
    Qwen Code rewrites a name with characters outside ``[A-Za-z0-9_-]`` (or past
    63 characters) with a hash suffix: such a name is decided as written, which
    the rules may not name (then it is asked about); the relay still decides the
    real call."""
    if kind not in _MCP_KINDS or not policy.mcp.servers:
        return None
    for name in (action.title, action.tool_name):
        if not name or not name.startswith("mcp__"):
            continue
        for server in policy.mcp.servers:
            prefix = f"mcp__{server.name}__"
            if name.startswith(prefix) and len(name) > len(prefix):
                raw = action.raw_input if isinstance(action.raw_input, Mapping) else {}
                return McpCall(server.name, "tools/call", name[len(prefix) :], raw)
    return None


def _subjects(action: ToolPermission, kind: str, cwd: str | None, policy: Policy) -> list[Decision]:
    raw = action.raw_input if isinstance(action.raw_input, Mapping) else {}
    for key in _COMMAND_KEYS:
        value = raw.get(key)
        if isinstance(value, str) and value.strip():
            return [decide_command(RunCommand(value, _cwd(raw, cwd)), policy)]
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return [decide_command(RunCommand(tuple(value), _cwd(raw, cwd)), policy)]
    paths = _paths(raw, action.locations)
    if kind in _WRITE_KINDS or (kind == "other" and _looks_like_write(raw)):
        return [decide_write(WriteFile(normalize(p, cwd)), policy) for p in paths]
    return [decide_read(ReadFile(normalize(p, cwd)), policy) for p in paths]


def _cwd(raw: Mapping[str, Any], default: str | None) -> str | None:
    for key in ("cwd", "workdir", "working_directory"):
        value = raw.get(key)
        if isinstance(value, str) and value.startswith("/"):
            return value
    return default


def _paths(raw: Mapping[str, Any], locations: tuple[str, ...]) -> list[str]:
    """Every path the input and the locations name, once each, in a fixed order."""
    found = [v for key in _PATH_KEYS if isinstance(v := raw.get(key), str) and v]
    for key in _PATH_LIST_KEYS:
        value = raw.get(key)
        if isinstance(value, list):
            found.extend(v for v in value if isinstance(v, str) and v)
    changes = raw.get("changes")
    if isinstance(changes, Mapping):
        found.extend(k for k in changes if isinstance(k, str) and k)
    found.extend(locations)
    return list(dict.fromkeys(found)) if len(found) > 1 else found


def _looks_like_write(raw: Mapping[str, Any]) -> bool:
    return any(k in raw for k in ("content", "new_string", "old_string", "edits", "changes"))


# -- combining ----------------------------------------------------------------------


def _strictest(parts: list[Decision]) -> Decision:
    if len(parts) == 1:
        return parts[0]
    worst = max(parts, key=lambda d: d.verdict)
    return Decision(worst.verdict, worst.rule, worst.reason, worst.by, tuple(parts))


def _clip(text: str, limit: int = 200) -> str:
    return clipped(text, limit)


def decide_network(action: Connect, policy: Policy) -> Decision:
    """A connection through the egress proxy (`governor.policies.network`). The proxy's
    own refusals (a malformed request) are ``protocol``, the special hosts
    ``protected``, a rule's word ``rule``, the rest the defaults (``capability``):
    `decide_connect` says which as it decides."""
    found = decide_connect(action, policy.network_rules)
    return Decision(found.verdict, found.rule, found.reason, by=found.by)


def decide_call(call: McpCall, policy: Policy) -> Decision:
    """An MCP request of the agent's (`governor.policies.mcp`): the job's ``[mcp]`` rules,
    then the capability's default."""
    found = decide_mcp(call, policy.mcp, policy.capability)
    return Decision(found.verdict, found.rule, found.reason, found.by)


_DECIDERS: Final[Mapping[type, Callable[[Any, Policy], Decision]]] = {
    ReadFile: decide_read,
    WriteFile: decide_write,
    RunCommand: decide_command,
    ToolPermission: decide_permission,
    Connect: lambda action, policy: decide_network(action, policy),
    McpCall: decide_call,
}
