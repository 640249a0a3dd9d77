"""Replay: re-decide an attempt's recorded actions under another policy.

Every permission, read, write, terminal, network and mcp record names its subject well
enough to rebuild the action the engine judged (the tool kind, title, the
decision-relevant raw input and locations of a tool call; the path and its
resolved target of a file call; the command line or argv, cwd and env names of
a command). The new policy is bound to the attempt's own workspace and roots
(its attempt-start record), so the only thing that differs is the policy.

A request decided in several parts (``cat a; ls b``) is one action here, as in
the tally. What changes is the *effect*: allowed, refused, or asked -- an ask
under the new policy is refused when nobody could have answered it (the
attempt ran unattended and the policy refuses asks).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, cast

from policies.actions import Action, Connect, ReadFile, RunCommand, ToolPermission, WriteFile
from policies.decide import Decision, decide, decide_call
from policies.mcp import SUBJECTS, McpCall, McpMethod
from policies.network import HostPatternError
from policies.paths import normalize
from policies.policy import Policy
from policies.rules import Verdict

REPLAYED_KINDS: Final = ("permission", "read", "write", "terminal", "network", "mcp")
UNAFFECTED_KINDS: Final = ("config", "elicitation", "mode")
"""Decisions no policy makes: the model and the asking mode follow the job and the
agent's offer, a form follows who answers; another policy leaves them as they were."""
PEOPLE: Final = frozenset({"person", "callback"})


class NotReplayable(Exception):
    """A record that names too little to rebuild its action."""


@dataclass(frozen=True, slots=True)
class Change:
    """One action whose effect the new policy changes."""

    line: int
    attempt: str
    seq: int
    kind: str
    subject: str
    was: str
    now: str
    rule: str
    reason: str
    approximate: bool = False

    @property
    def label(self) -> str:
        """``allowed -> refused`` and the like."""
        return f"{self.was} -> {self.now}"


@dataclass(frozen=True, slots=True)
class Replay:
    """The changes in one attempt, how many actions were re-decided, and the
    records that could not be (with why)."""

    attempt: str
    actions: int
    changes: tuple[Change, ...]
    skipped: tuple[str, ...] = ()
    unaffected: int = 0
    """Records of `UNAFFECTED_KINDS`: kept as they were."""


def bound_policy(policy: Policy, start: Mapping[str, Any], protected: tuple[str, ...]) -> Policy:
    """The policy bound to the roots an attempt-start record names."""
    roots = start.get("roots")
    workspace = start.get("workspace")
    if not isinstance(roots, list) or not roots or not all(isinstance(r, str) for r in roots):
        if not isinstance(workspace, str):
            raise NotReplayable("its attempt-start record names no workspace")
        roots = [workspace]
    recorded = start.get("protected")
    if isinstance(recorded, list):  # the ceiling's protected paths at the time
        protected = tuple(dict.fromkeys([*protected, *(p for p in recorded if isinstance(p, str))]))
    bound = policy.bind(roots[0], tuple(roots[1:]), protected=protected)
    hosts = start.get("agent_hosts")
    if isinstance(hosts, list):  # the agent's own API hosts: its preset's, not the policy's
        try:
            agent = bound.network_rules.with_agent([h for h in hosts if isinstance(h, str)])
        except HostPatternError as e:
            raise NotReplayable(f"its attempt-start record names a bad agent host: {e}") from None
        bound = replace(bound, network_rules=agent)
    return bound


def action_of(record: Mapping[str, Any]) -> tuple[Action, Action | None, bool]:
    """The action a record answered, the action of the name as given when a file
    path was resolved through a symlink (judged too, as the governor does), and
    whether the rebuild is approximate (a record from before subjects carried
    the raw input)."""
    kind = record.get("kind")
    subject = record.get("subject")
    if not isinstance(subject, Mapping):
        raise NotReplayable("the record has no subject")
    if kind in ("read", "write"):
        path = subject.get("path")
        if not isinstance(path, str):
            raise NotReplayable("the file record names no path")
        resolved = subject.get("resolved")
        make = ReadFile if kind == "read" else WriteFile
        if isinstance(resolved, str) and resolved != path:
            return make(resolved), make(normalize(path)), False
        return make(path), None, False
    if kind == "terminal":
        argv = subject.get("argv")
        command = subject.get("command")
        cwd = subject.get("cwd") if isinstance(subject.get("cwd"), str) else None
        env = tuple(e for e in subject.get("env") or () if isinstance(e, str))
        if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
            return RunCommand(tuple(argv), cwd, env), None, False
        if not isinstance(command, str):
            raise NotReplayable("the terminal record names no command")
        return RunCommand(command, cwd, env), None, False
    if kind == "permission":
        tool_kind = subject.get("tool_kind")
        title = subject.get("title") if isinstance(subject.get("title"), str) else ""
        locations = tuple(p for p in subject.get("paths") or () if isinstance(p, str))
        raw = subject.get("input")
        approximate = not isinstance(raw, Mapping)
        if approximate:
            command = subject.get("command")
            raw = {"command": command} if isinstance(command, str) else {}
        return (
            ToolPermission(
                tool_kind if isinstance(tool_kind, str) else None, str(title), raw, locations
            ),
            None,
            approximate,
        )
    if kind == "network":
        host, port = subject.get("host"), subject.get("port")
        if not isinstance(host, str) or not isinstance(port, int):
            raise NotReplayable("the network record names no host and port")
        method, path, problem = subject.get("method"), subject.get("path"), subject.get("problem")
        addresses = subject.get("addresses") or record.get("addresses") or []
        return (
            Connect(
                host,
                port,
                method if isinstance(method, str) else None,
                path if isinstance(path, str) else None,
                str(subject.get("origin") or "command"),
                tuple(a for a in addresses if isinstance(a, str)),
                problem if isinstance(problem, str) else None,
            ),
            None,
            False,
        )
    raise NotReplayable(f"a {kind} record is not an action")


def mcp_call_of(record: Mapping[str, Any]) -> tuple[McpCall, bool]:
    """The MCP call an ``mcp`` record answered, and whether the rebuild is
    approximate (an argument the log kept only the size of)."""
    subject = record.get("subject")
    if not isinstance(subject, Mapping):
        raise NotReplayable("the record has no subject")
    server, method, name = subject.get("server"), subject.get("method"), subject.get("name")
    if not isinstance(server, str) or method not in SUBJECTS or not isinstance(name, str):
        raise NotReplayable("the mcp record names no server call (a server's own request)")
    arguments = subject.get("arguments")
    arguments = dict(arguments) if isinstance(arguments, Mapping) else {}
    sized = any(isinstance(v, str) and v.startswith("<") and v.endswith(">") for v in arguments.values())
    return McpCall(server, cast(McpMethod, method), name, arguments), sized


def _redecide(record: Mapping[str, Any], policy: Policy) -> tuple[Decision, bool]:
    if record.get("kind") == "mcp":
        call, approximate = mcp_call_of(record)
        return decide_call(call, policy), approximate
    action, as_named, approximate = action_of(record)
    decision = decide(action, policy)
    if as_named is not None and decision.allowed:
        first = decide(as_named, policy)
        decision = first if not first.allowed else decision
    return decision, approximate


def _was(group: list[Mapping[str, Any]]) -> tuple[str, bool]:
    """The effect a request had, and whether a person decided it."""
    verdicts = {r.get("verdict") for r in group}
    by_person = any(r.get("by") in ("person", "grant") for r in group)
    if "deny" in verdicts:
        return "refused", by_person
    if "approval" in verdicts:
        return "waiting", True
    return "allowed", by_person


def _now(verdict: Verdict, policy: Policy, approvals: str) -> str:
    if verdict is Verdict.ALLOW:
        return "allowed"
    if verdict is Verdict.DENY:
        return "refused"
    if approvals in PEOPLE or policy.on_ask == "person":
        return "asked"
    return "waiting" if policy.on_ask == "pause" else "refused"


def shown(record: Mapping[str, Any]) -> str:
    """A record's subject in a few words: the command, path or title."""
    subject = record.get("subject")
    if not isinstance(subject, Mapping):
        return ""
    server, name = subject.get("server"), subject.get("name")
    if isinstance(server, str) and isinstance(name, str):
        return f"{server}.{name}"
    host, port = subject.get("host"), subject.get("port")
    if isinstance(host, str) and isinstance(port, int):
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        method = subject.get("method")
        if isinstance(method, str) and method != "CONNECT":
            return f"{method} http://{where}{subject.get('path') or ''}"
        return where
    for key in ("command", "path", "title", "tool_call"):
        value = subject.get(key)
        if isinstance(value, str) and value:
            return value
    paths = subject.get("paths")
    if isinstance(paths, list) and paths:
        return ", ".join(map(str, paths))
    return ""


def replay(
    records: Iterable[tuple[int, Mapping[str, Any]]],
    policy: Policy,
    *,
    protected: tuple[str, ...] = (),
) -> list[Replay]:
    """Each attempt's changes when its actions are re-decided under ``policy``.

    ``records`` are (line number, record) in log order; ``policy`` is unbound
    (each attempt binds it to its own roots).
    """
    attempts: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
    for n, r in records:
        attempt = r.get("attempt")
        if isinstance(attempt, str):
            attempts.setdefault(attempt, []).append((n, r))
    out = []
    for attempt, lines in attempts.items():
        start = lines[0][1] if lines[0][1].get("kind") == "attempt-start" else None
        if start is None:
            out.append(Replay(attempt, 0, (), ("its attempt-start record is missing",)))
            continue
        try:
            bound = bound_policy(policy, start, protected)
        except (NotReplayable, ValueError) as e:
            out.append(Replay(attempt, 0, (), (str(e),)))
            continue
        approvals = str(start.get("approvals") or "unattended")
        groups: dict[Any, list[tuple[int, Mapping[str, Any]]]] = {}
        unaffected = sum(1 for _, r in lines if r.get("kind") in UNAFFECTED_KINDS)
        for n, r in lines:
            if r.get("kind") not in REPLAYED_KINDS or r.get("verdict") == "reported":
                continue
            key = r.get("request")
            groups.setdefault(("#", n) if key is None else ("r", key), []).append((n, r))
        changes: list[Change] = []
        skipped: list[str] = []
        for group in groups.values():
            n, first = group[0]
            try:
                decision, approximate = _redecide(first, bound)
            except NotReplayable as e:
                skipped.append(f"line {n}: {e}")
                continue
            was, by_person = _was([r for _, r in group])
            now = _now(decision.verdict, bound, approvals)
            if was == now or (by_person and now == "asked"):
                continue
            seq = first.get("seq")
            changes.append(
                Change(
                    n,
                    attempt,
                    seq if isinstance(seq, int) else 0,
                    str(first.get("kind")),
                    shown(first),
                    was,
                    now,
                    decision.rule,
                    decision.reason,
                    approximate,
                )
            )
        out.append(Replay(attempt, len(groups), tuple(changes), tuple(skipped), unaffected))
    return out
