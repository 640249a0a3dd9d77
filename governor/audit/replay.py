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

import heapq
import json
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, cast

from governor.policies.actions import (
    Action,
    Connect,
    ReadFile,
    RunCommand,
    ToolPermission,
    WriteFile,
)
from governor.policies.decide import Decision, decide, decide_call
from governor.policies.mcp import SUBJECTS, McpCall, McpMethod
from governor.policies.network import HostPatternError
from governor.policies.paths import normalize
from governor.policies.policy import Policy
from governor.policies.rules import Verdict

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
    counts: tuple[tuple[str, int], ...] = ()
    """Every change by its label (``allowed -> refused``), listed or not."""
    more_skipped: int = 0
    """Records not replayed past those `skipped` names."""

    @property
    def changed(self) -> int:
        """How many actions the new policy changes (``changes`` lists the first)."""
        return sum(n for _, n in self.counts)


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
        listed = subject.get("paths")
        locations = tuple(p for p in (listed if isinstance(listed, list) else ()) if isinstance(p, str))
        raw = subject.get("input")
        approximate = not isinstance(raw, Mapping)
        if approximate:
            command = subject.get("command")
            raw = {"command": command} if isinstance(command, str) else {}
        tool_name = subject.get("tool_name")
        return (
            ToolPermission(
                tool_kind if isinstance(tool_kind, str) else None, str(title), raw, locations,
                tool_name=tool_name if isinstance(tool_name, str) else None,
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
    length = subject.get("length")
    if record.get("kind") == "wire" and isinstance(length, int):  # a line rejected at the wire
        method = subject.get("method")
        named = f"{method} " if isinstance(method, str) else ""
        return f"{named}line of {length} bytes"
    return ""


OPEN_REQUESTS: Final = 256
"""Requests whose records are still gathered, per attempt: the last ones seen (the
gate writes a request's records one after another, as `governor.audit.tally`
counts them). One that drops out is re-decided and forgotten."""
CHANGES_LISTED: Final = 1000
"""Changes an attempt's replay lists (the first by line); every change is counted."""
SKIPPED_LISTED: Final = 100
"""Records an attempt's replay names as not replayed; the rest are counted."""


def _request_key(request: Any, n: int) -> Any:
    """The group a record's request id puts it in (a record without one is its own)."""
    if request is None:
        return ("#", n)
    if isinstance(request, str | int | float):  # 1, 1.0, true and "1" are different requests
        return (type(request), request)
    return ("json", json.dumps(request, sort_keys=True))


@dataclass(slots=True)
class _Request:
    """One request's records as far as its replay needs them: the first, and
    what all of them decided."""

    line: int
    first: Mapping[str, Any]
    refused: bool = False
    waited: bool = False
    by_person: bool = False

    def add(self, record: Mapping[str, Any]) -> None:
        verdict = record.get("verdict")
        self.refused |= verdict == "deny"
        self.waited |= verdict == "approval"
        self.by_person |= record.get("by") in ("person", "grant")

    def was(self) -> tuple[str, bool]:
        """The effect the request had, and whether a person decided it."""
        if self.refused:
            return "refused", self.by_person
        if self.waited:
            return "waiting", True
        return "allowed", self.by_person


class _Replaying:
    """One attempt's replay, a record at a time: its bound policy, its open
    requests, the changes found (the first `CHANGES_LISTED` by line kept)."""

    def __init__(
        self, attempt: str, first: Mapping[str, Any], policy: Policy, protected: tuple[str, ...]
    ) -> None:
        self.attempt = attempt
        self.problem: str | None = None
        self.bound = policy
        self.start: Mapping[str, Any] | None = first if first.get("kind") == "attempt-start" else None
        if first.get("kind") != "attempt-start":
            self.problem = "its attempt-start record is missing"
        else:
            try:
                self.bound = bound_policy(policy, first, protected)
            except (NotReplayable, ValueError) as e:
                self.problem = str(e)
        self.approvals = str(first.get("approvals") or "unattended")
        self.open: OrderedDict[Any, _Request] = OrderedDict()
        self.actions = self.unaffected = self.more_skipped = 0
        self.listed: list[tuple[int, int, Change]] = []  # a heap: (-line, order, change)
        self.counts: dict[str, int] = {}
        self.skipped: list[str] = []

    def add(self, n: int, record: Mapping[str, Any]) -> None:
        if self.problem is not None:
            return
        kind = record.get("kind")
        self.unaffected += kind in UNAFFECTED_KINDS
        if kind not in REPLAYED_KINDS or record.get("verdict") == "reported":
            return
        key = _request_key(record.get("request"), n)
        request = self.open.get(key)
        if request is None:
            request = self.open[key] = _Request(n, record)
            if len(self.open) > OPEN_REQUESTS:
                self._decide(self.open.popitem(last=False)[1])
        else:
            self.open.move_to_end(key)
        request.add(record)

    def _decide(self, request: _Request) -> None:
        self.actions += 1
        try:
            decision, approximate = _redecide(request.first, self.bound)
        except NotReplayable as e:
            if len(self.skipped) < SKIPPED_LISTED:
                self.skipped.append(f"line {request.line}: {e}")
            else:
                self.more_skipped += 1
            return
        was, by_person = request.was()
        now = _now(decision.verdict, self.bound, self.approvals)
        if was == now or (by_person and now == "asked"):
            return
        first, seq = request.first, request.first.get("seq")
        change = Change(
            request.line,
            self.attempt,
            seq if isinstance(seq, int) else 0,
            str(first.get("kind")),
            shown(first),
            was,
            now,
            decision.rule,
            decision.reason,
            approximate,
        )
        self.counts[change.label] = self.counts.get(change.label, 0) + 1
        entry = (-change.line, self.actions, change)
        if len(self.listed) < CHANGES_LISTED:
            heapq.heappush(self.listed, entry)
        elif entry > self.listed[0]:  # an earlier line than the latest listed
            heapq.heapreplace(self.listed, entry)

    def done(self) -> Replay:
        if self.problem is not None:
            return Replay(self.attempt, 0, (), (self.problem,))
        while self.open:
            self._decide(self.open.popitem(last=False)[1])
        changes = tuple(sorted((c for _, _, c in self.listed), key=lambda c: c.line))
        return Replay(
            self.attempt,
            self.actions,
            changes,
            tuple(self.skipped),
            self.unaffected,
            tuple(sorted(self.counts.items())),
            self.more_skipped,
        )


def replay(
    records: Iterable[tuple[int, Mapping[str, Any]]],
    policy: Policy,
    *,
    protected: tuple[str, ...] = (),
) -> Iterator[Replay]:
    """Each attempt's changes when its actions are re-decided under ``policy``,
    as each attempt ends (those with no end after the last record).

    ``records`` are (line number, record) in log order, read one at a time and
    never gathered: what is kept per attempt is bounded (`OPEN_REQUESTS`,
    `CHANGES_LISTED`, `SKIPPED_LISTED`). ``policy`` is unbound (each attempt
    binds it to its own roots, from its first record, its attempt-start).
    """
    replaying: dict[str, _Replaying] = {}
    paused: dict[str, Mapping[str, Any]] = {}
    """The start records of attempts that ended paused: a resumed part (its
    approval, its attempt-resume) is bound as its attempt was."""
    for n, r in records:
        attempt = r.get("attempt")
        if not isinstance(attempt, str):
            continue
        state = replaying.get(attempt)
        if state is None:
            first = paused.pop(attempt, r) if r.get("kind") == "approval" else r
            state = replaying[attempt] = _Replaying(attempt, first, policy, protected)
        state.add(n, r)
        if r.get("kind") == "attempt-end":
            ended = replaying.pop(attempt)
            if r.get("status") == "needs_approval" and ended.start is not None:
                paused[attempt] = ended.start
            yield ended.done()
    for state in replaying.values():
        yield state.done()
