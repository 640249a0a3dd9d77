"""`governor audit`'s views of attempts: refusals, connections, one attempt's
story (the HTML report page is `governor.cli.audit_report`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from governor.audit.read_in_passes import Checked, records
from governor.audit.replay import shown
from governor.audit.tally import verdict_of
from governor.audit.verify import UNFINISHED
from governor.boundary.display import terminal
from governor.cli.audit_common import TALLY_COLUMNS
from governor.cli.outcome_json import listing, write_json

A = TypeVar("A", bound="Named")


def _each(logs: Sequence[Checked], attempts: Collection[str] | None = None) -> Iterator[tuple[Checked, dict[str, Any]]]:
    """Every record of the checked logs (of ``attempts`` when given), one at a time."""
    for log in logs:
        for _, record in records(log, attempts):
            yield log, record


def _attempts(logs: Sequence[Checked]) -> int:
    return sum(len(log.attempts) for log in logs)


def _listed(
    found: Iterator[dict[str, Any]],
    as_json: bool,
    lines: Callable[[dict[str, Any]], Iterator[str]],
    key: str,
    problems: Sequence[str],
) -> int:
    """Write what a view found as it is found: a JSON document listing it under
    ``key`` (`governor.cli.outcome_json.listing`), or each item's lines.
    Returns how many items there were."""
    count = 0

    def counted() -> Iterator[dict[str, Any]]:
        nonlocal count
        for x in found:
            count += 1
            yield x

    if as_json:
        write_json(listing(key, counted(), problems), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return count
    for x in counted():
        for line in lines(x):  # a log's fields hold the agent's words: one terminal-safe line each
            print(terminal(line))
    return count


def connections(logs: Sequence[Checked], as_json: bool, problems: Sequence[str] = ()) -> int:
    """Every ``network`` record: the connection, who asked, the verdict and why."""
    allowed = 0

    def found() -> Iterator[dict[str, Any]]:
        nonlocal allowed
        for log, r in _each(logs):
            if r.get("kind") == "network":
                allowed += r.get("verdict") == "allow"
                yield {
                    "attempt": r["attempt"],
                    "log": str(log.path),
                    "seq": r.get("seq"),
                    "time": r.get("time"),
                    "subject": shown(r),
                    "origin": (r.get("subject") or {}).get("origin"),
                    "verdict": r.get("verdict"),
                    "by": r.get("by"),
                    "rule": r.get("rule"),
                    "reason": r.get("reason"),
                }

    def lines(x: dict[str, Any]) -> Iterator[str]:
        verdict = str(x["verdict"] or "-")  # a record may lack one: format no None
        yield f"{x['attempt']} #{x['seq']} {verdict:<8} {x['origin']}: {x['subject']}"
        yield f"    {x['by']} [{x['rule']}]: {x['reason']}"

    count = _listed(found(), as_json, lines, "connections", problems)
    if as_json:
        return 0
    if not count:
        print(f"no connection in {_attempts(logs)} attempt(s)")
        return 0
    print(f"\n{count} connection(s) in {_attempts(logs)} attempt(s): {allowed} allowed, "
          f"{count - allowed} refused or waiting")  # fmt: skip
    return 0


def check_runs(logs: Sequence[Checked], as_json: bool, problems: Sequence[str] = ()) -> int:
    """Every ``check`` record: the command run after an attempt, its verdict,
    exit status and duration (its output's tail with ``--json``)."""
    passed = 0

    def found() -> Iterator[dict[str, Any]]:
        nonlocal passed
        for log, r in _each(logs):
            if r.get("kind") == "check":
                passed += r.get("verdict") == "passed"
                yield {
                    "attempt": r["attempt"],
                    "log": str(log.path),
                    "seq": r.get("seq"),
                    "time": r.get("time"),
                    "command": (r.get("subject") or {}).get("command"),
                    "verdict": r.get("verdict"),
                    "exit": r.get("exit"),
                    "duration_s": r.get("duration_s"),
                    "timed_out": bool(r.get("timed_out")),
                    "error": r.get("error"),
                    "tail": r.get("tail"),
                }

    def lines(x: dict[str, Any]) -> Iterator[str]:
        how = x["error"] or ("timed out" if x["timed_out"] else f"exit {x['exit']}")
        yield f"{x['attempt']} #{x['seq']} {x['verdict']:<6} {x['command']} ({how}, {x['duration_s']} s)"

    count = _listed(found(), as_json, lines, "check_runs", problems)
    if as_json:
        return 0
    if not count:
        print(f"no check in {_attempts(logs)} attempt(s)")
        return 0
    print(f"\n{count} check(s) in {_attempts(logs)} attempt(s): {passed} passed, "
          f"{count - passed} failed")  # fmt: skip
    return 0



def mcp_calls(logs: Sequence[Checked], as_json: bool, problems: Sequence[str] = ()) -> int:
    """Per attempt, in the log's order: its MCP servers (``mcp-server``
    records: name, command, writable, network), the tools each offered
    (``mcp-tools``: the names a ``tools/list`` gave, those hidden) and every
    call decided (``mcp`` records: the call, the verdict and why; and each
    request that came through the governor's own tools, `governor.mcp.own_tools`:
    its read, write or terminal records, whose subject says ``via:
    mcp:governor``, as one call); then, per attempt, the calls per server.
    With ``--json`` one array of those items, each with its ``type``
    (``server``, ``tools``, ``call``), streamed."""
    calls = 0
    attempts: list[tuple[str, dict[str, list[int]]]] = []
    """Each attempt's calls per server [allowed, other], the current one last."""

    def tally(x: dict[str, Any]) -> None:
        if not attempts or attempts[-1][0] != x["attempt"]:
            attempts.append((x["attempt"], {}))
            del attempts[:-2]  # the text view prints one attempt's summary as the next begins
        counts = attempts[-1][1].setdefault(str(x["server"]), [0, 0])
        if x["type"] == "call":
            counts[0 if x["verdict"] == "allow" else 1] += 1

    def found() -> Iterator[dict[str, Any]]:
        nonlocal calls
        own: list[dict[str, Any]] = []  # one own-tools request's records (a command's parts)
        own_log: list[Checked] = []

        def own_call() -> dict[str, Any]:
            """The request in ``own`` as one call: refused when a part was."""
            nonlocal calls
            calls += 1
            r = next((g for g in own if g.get("verdict") == "deny"), None)
            r = r or next((g for g in own if g.get("verdict") != "allow"), own[0])
            via = str((r.get("subject") or {}).get("via"))
            x = {"type": "call", "attempt": r["attempt"], "log": str(own_log[0].path), "seq": r.get("seq"),
                 "time": r.get("time"), "server": via.removeprefix("mcp:"),
                 "method": f"tools/call {OWN_TOOLS[str(r.get('kind'))]}", "subject": shown(r),
                 "verdict": r.get("verdict"), "by": r.get("by"), "rule": r.get("rule"),
                 "reason": r.get("reason")}  # fmt: skip
            own.clear()
            own_log.clear()
            tally(x)
            return x

        for log, r in _each(logs):
            kind = r.get("kind")
            subject = r.get("subject") or {}
            if kind in OWN_TOOLS and str(subject.get("via", "")).startswith("mcp:"):
                if own and (own[0].get("attempt"), own[0].get("request"), own[0].get("kind")) != (
                    r.get("attempt"), r.get("request"), kind
                ):
                    yield own_call()
                own.append(r)
                own_log[:] = [log]
                continue
            if own:  # the gate writes a request's records one after another
                yield own_call()
            if kind not in _MCP_KINDS:
                continue
            x: dict[str, Any] = {"type": _MCP_KINDS[kind], "attempt": r["attempt"], "log": str(log.path),
                                 "seq": r.get("seq"), "time": r.get("time"), "server": subject.get("server")}  # fmt: skip
            if kind == "mcp-server":
                x.update({k: subject.get(k) for k in ("command", "url", "writable", "network")})
                if subject.get("own") is True:  # the governor's own tools (governor.mcp.own_tools)
                    x["own"] = True
            elif kind == "mcp-tools":
                x.update({"tools": _list(subject.get("tools")), "hidden": _list(subject.get("hidden"))})
                x.update({k: subject[k] for k in ("more", "more_hidden") if type(subject.get(k)) is int})
            else:
                calls += 1
                x.update({"method": subject.get("method"), "subject": shown(r), "verdict": r.get("verdict"),
                          "by": r.get("by"), "rule": r.get("rule"), "reason": r.get("reason")})  # fmt: skip
            tally(x)
            yield x
        if own:
            yield own_call()

    shown_attempt: list[str] = []

    def lines(x: dict[str, Any]) -> Iterator[str]:
        if shown_attempt[-1:] != [x["attempt"]]:
            if shown_attempt and len(attempts) > 1:
                yield from _per_server(attempts[-2][1])
            shown_attempt[:] = [x["attempt"]]
            yield f"attempt {x['attempt']} ({x['log']})"
        if x["type"] != "call":
            yield f"  {mcp_listing(x['type'], x)}"
        else:
            verdict = str(x["verdict"] or "-")
            yield f"  #{x['seq']} {verdict:<8} {x['method']}: {x['subject']}"
            yield f"      {x['by']} [{x['rule']}]: {x['reason']}"

    count = _listed(found(), as_json, lines, "mcp", problems)
    if as_json:
        return 0
    if not count:
        print(f"no MCP server or call in {_attempts(logs)} attempt(s)")
        return 0
    for line in _per_server(attempts[-1][1]):
        print(terminal(line))
    print(f"\n{calls} MCP call(s) decided in {_attempts(logs)} attempt(s)")
    return 0


_MCP_KINDS: Final = {"mcp-server": "server", "mcp-tools": "tools", "mcp": "call"}
OWN_TOOLS: Final = {"read": "read", "write": "write", "terminal": "run"}
"""The record kinds a call to the governor's own tools is written as, and the tool."""


def mcp_listing(kind: str, subject: dict[str, Any]) -> str:
    """A ``mcp-server`` (``server``) or ``mcp-tools`` (``tools``) record's subject in words."""
    if kind == "server":
        run = " ".join(map(str, _list(subject.get("command")))) or str(subject.get("url") or "")
        if subject.get("own") is True and not run:
            run = "the governor's own tools, answered in-process"
        access = "writable" if subject.get("writable") else "read-only"
        network = ", ".join(map(str, _list(subject.get("network")))) or "none"
        return f"server {subject.get('server')}: {run} ({access}; network: {network})"
    listed = ", ".join(map(str, _list(subject.get("tools")))) or "none"
    hidden = ", ".join(map(str, _list(subject.get("hidden")))) or "none"
    more, more_hidden = subject.get("more"), subject.get("more_hidden")
    if type(more) is int and more > 0:
        listed += f" (and {more:,} more)"
    if type(more_hidden) is int and more_hidden > 0:
        hidden += f" (and {more_hidden:,} more)"
    return f"tools of {subject.get('server')}: {listed}; hidden: {hidden}"


def _list(value: Any) -> list[Any]:
    """A field a crafted log may hold anything in, as the list the writer wrote."""
    return value if isinstance(value, list) else []


def _per_server(servers: dict[str, list[int]]) -> Iterator[str]:
    for server, (allowed, other) in servers.items():
        if allowed + other > 0:
            yield f"  {server}: {allowed + other} call(s), {allowed} allowed, {other} refused or waiting"


def refusals(logs: Sequence[Checked], as_json: bool, problems: Sequence[str] = ()) -> int:
    """Every refused action, with who refused it, the rule and the reason; then
    the failures (no rule refused them: a name that does not resolve, a host
    that does not answer, a request after the turn was over), identical ones
    grouped with their count. With ``--json`` each failure is an item of its
    own, with its ``failed`` word."""
    groups: dict[tuple[str, ...], list[Any]] = {}

    def found() -> Iterator[dict[str, Any]]:
        for log, r in _each(logs):
            if r.get("verdict") != "deny":
                continue
            x = {
                "attempt": r["attempt"],
                "log": str(log.path),
                "seq": r.get("seq"),
                "time": r.get("time"),
                "kind": r.get("kind"),
                "subject": shown(r),
                "by": r.get("by"),
                "rule": r.get("rule"),
                "reason": r.get("reason"),
            }
            if r.get("failed"):
                x["failed"] = r.get("failed")
                if not as_json:
                    key = (str(x["attempt"]), str(x["kind"]), str(x["subject"]), str(x["failed"]),
                           str(x["reason"]))  # fmt: skip
                    if key in groups or len(groups) < 10_000:
                        groups.setdefault(key, [x, 0])[1] += 1
                    continue
            yield x

    def lines(x: dict[str, Any]) -> Iterator[str]:
        yield f"{x['attempt']} #{x['seq']} {x['kind']}: {x['subject']}"
        yield f"    refused by {x['by']} [{x['rule']}]: {x['reason']}"

    count = _listed(found(), as_json, lines, "refusals", problems)
    if as_json:
        return 0
    failed = sum(n for _, n in groups.values())
    if groups:
        print(f"\nfailed, no rule refused these ({failed}, identical ones as one):")
        for x, n in groups.values():
            times = f" ({n} times)" if n > 1 else ""
            # a log's fields hold the agent's words: one terminal-safe line each
            print(terminal(f"{x['attempt']} #{x['seq']} {x['kind']}: {x['subject']}{times}"))
            print(terminal(f"    failed ({x['failed']}): {x['reason']}"))
    if not count:
        print(f"nothing was refused in {_attempts(logs)} attempt(s)")
        return 0
    print(f"\n{count} refused in {_attempts(logs)} attempt(s)")
    return 0


class Named(Protocol):
    """Anything that stands for one attempt."""

    @property
    def attempt(self) -> str: ...


@dataclass(frozen=True, slots=True)
class InLog:
    """An attempt of a checked log."""

    log: Checked
    attempt: str


def in_logs(logs: Sequence[Checked]) -> list[InLog]:
    """Every attempt of the checked logs, log by log."""
    return [InLog(log, a) for log in logs for a in log.attempts]


def find_attempt(groups: Sequence[A], wanted: str) -> A:
    """The attempt with this id, or the only one it is a prefix of."""
    exact = [g for g in groups if g.attempt == wanted]
    if exact:
        return exact[0]
    matches = [g for g in groups if g.attempt.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise LookupError(f"no attempt {wanted!r} in the logs read ({len(groups)} attempt(s))")
    names = ", ".join(g.attempt for g in matches[:5])
    raise LookupError(f"{wanted!r} names {len(matches)} attempts ({names}...): give more of the id")
def describe(record: dict[str, Any], t0: float | None) -> str:
    """One record as one line of an attempt's story."""
    kind = record.get("kind")
    at = record.get("time")
    clock = f"+{at - t0:.3f}s" if isinstance(at, int | float) and t0 is not None else ""
    clock = clock.rjust(9)
    head = f"{clock} #{record.get('seq')}"
    if kind == "attempt-start":
        argv = " ".join(map(str, record.get("argv") or []))
        return (
            f"{head} started {record.get('preset') or record.get('agent')} ({argv}) in "
            f"{record.get('workspace')}: capability {record.get('capability')}, approvals "
            f"{record.get('approvals')}, agent {'sandboxed' if record.get('sandboxed_agent') else 'NOT sandboxed'}, "
            f"policy {record.get('policy_source')} ({record.get('policy')}), ceiling "
            f"{record.get('ceiling_source')} ({record.get('ceiling')})"
            + (f", trace {record['trace_id']}" if record.get("trace_id") else "")
        )
    if kind == "approval":  # a person's decision on a paused attempt's request
        return (
            f"{head} approval of request {record.get('request')} ({shown(record)}): "
            f"{record.get('answer')} by {record.get('user')} (uid {record.get('uid')})"
        )
    if kind == "attempt-resume":
        return (
            f"{head} resumed (part {record.get('part')}, after the approval #{record.get('approval')}): "
            f"capability {record.get('capability')}, policy {record.get('policy_source')} "
            f"({record.get('policy')}), ceiling {record.get('ceiling_source')} ({record.get('ceiling')})"
        )
    if kind == "check":
        how = "timed out" if record.get("timed_out") else f"exit {record.get('exit')}"
        return (
            f"{head} check {shown(record)}: {record.get('verdict')} "
            f"({record.get('error') or how}, {record.get('duration_s')} s)"
        )
    if kind == "exit":  # what came of an allowed command (`governor.audit.effects`)
        signal, code = record.get("signal"), record.get("exit_code")
        how = f"killed by {signal}" if signal else f"exit {code}"
        tail = str(record.get("tail") or "").rsplit("\n", 1)[-1][-200:]
        return f"{head} exit of #{record.get('decision')} {shown(record)}: {how}" + (
            f": {tail}" if tail else ""
        )
    if kind == "diff":  # what an allowed write changed (`governor.audit.effects`)
        diff = str(record.get("diff") or "").splitlines()
        added = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
        removed = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
        return f"{head} diff of #{record.get('decision')} {shown(record)}: +{added} \u2212{removed}"
    if kind in _MCP_KINDS and kind != "mcp":
        return f"{head} {kind}: {mcp_listing(_MCP_KINDS[kind], record.get('subject') or {})}"
    if kind == "model":  # a model call seen on the wire (`governor.gate.model_calls`)
        called = record.get("subject")
        called = called if isinstance(called, dict) else {}
        host, port = called.get("host"), called.get("port")
        tokens = record.get("tokens")
        tokens = tokens if isinstance(tokens, dict) else {}
        counted = ", ".join(f"{v} {k}" for k, v in tokens.items()) or "no tokens read"
        return (
            f"{head} model: {called.get('method')} {host}:{port}{called.get('path') or ''} "
            f"{record.get('model') or '(no model named)'} -> {record.get('http_status')}, "
            f"{counted}, stop {record.get('stop_reason')}, first byte "
            f"{record.get('first_byte_ms')} ms, {record.get('duration_ms')} ms"
        )
    if kind == "attempt-end":
        t = record.get("tally") or {}
        counts = ", ".join(f"{t.get(c, 0)} {c}" for c in TALLY_COLUMNS)
        reason = f": {record.get('reason')}" if record.get("reason") else ""
        return (
            f"{head} ended {record.get('status')}{reason} ({counts}; {record.get('duration_s')} s)"
        )
    request = f" request {record['request']}" if record.get("request") is not None else ""
    option = f", option {record['option']}" if record.get("option") else ""
    subject = record.get("subject")
    via = subject.get("via") if isinstance(subject, dict) else None
    came = f" via {via}" if isinstance(via, str) else ""  # the governor's own tools: mcp:governor
    return (
        f"{head} {kind}{request}{came}: {shown(record)} -> {verdict_of(record)} by "
        f"{record.get('by')} [{record.get('rule', '')}]{option}: {record.get('reason', '')}"
    )


def story(logs: Sequence[Checked], wanted: str, as_json: bool, problems: Sequence[str] = ()) -> int:
    """One attempt's records, each as a line (or the records as JSON), as they
    are read from its log."""
    try:
        found = find_attempt(in_logs(logs), wanted)
    except LookupError as e:
        print(f"governor audit: {e}", file=sys.stderr)
        return 1
    told = (r for _, r in records(found.log, {found.attempt}))
    if as_json:
        write_json(listing("records", told, problems, attempt=found.attempt), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    t0: float | None = None
    last: dict[str, Any] | None = None
    for r in told:
        if last is None:
            at = r.get("time")
            t0 = at if isinstance(at, int | float) else None
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t0)) if t0 is not None else "?"
            print(terminal(f"attempt {found.attempt} ({found.log.path}), started {when}"))
        print(terminal(describe(r, t0)))
        last = r
    if last is None or last.get("kind") != "attempt-end":
        print(f"          {UNFINISHED}")
    return 0


# -- verify ---------------------------------------------------------------------------
