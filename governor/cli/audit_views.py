"""`governor audit`'s views of attempts: refusals, connections, one attempt's
story (the HTML report page is `governor.cli.audit_report`)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import Any

from governor.audit.reading import (
    AttemptRecords,
)
from governor.audit.replay import shown
from governor.audit.verify import UNFINISHED
from governor.cli.audit import TALLY_COLUMNS
from governor.display import terminal


def _refused(group: AttemptRecords) -> Iterator[dict[str, Any]]:
    for r in group.records:
        if r.get("verdict") == "deny":
            yield {
                "attempt": group.attempt,
                "log": group.source,
                "seq": r.get("seq"),
                "time": r.get("time"),
                "kind": r.get("kind"),
                "subject": shown(r),
                "by": r.get("by"),
                "rule": r.get("rule"),
                "reason": r.get("reason"),
            }


def connections(groups: list[AttemptRecords], as_json: bool) -> int:
    """Every ``network`` record: the connection, who asked, the verdict and why."""
    found = [
        {
            "attempt": g.attempt,
            "log": g.source,
            "seq": r.get("seq"),
            "time": r.get("time"),
            "subject": shown(r),
            "origin": (r.get("subject") or {}).get("origin"),
            "verdict": r.get("verdict"),
            "by": r.get("by"),
            "rule": r.get("rule"),
            "reason": r.get("reason"),
        }
        for g in groups
        for r in g.records
        if r.get("kind") == "network"
    ]
    if as_json:
        print(json.dumps(found, indent=1, ensure_ascii=False))
        return 0
    if not found:
        print(f"no connection in {len(groups)} attempt(s)")
        return 0
    for x in found:
        verdict = str(x["verdict"] or "-")  # a record may lack one: format no None
        # a log's fields hold the agent's words: one terminal-safe line each
        print(terminal(f"{x['attempt']} #{x['seq']} {verdict:<8} {x['origin']}: {x['subject']}"))
        print(terminal(f"    {x['by']} [{x['rule']}]: {x['reason']}"))
    allowed = sum(1 for x in found if x["verdict"] == "allow")
    print(f"\n{len(found)} connection(s) in {len(groups)} attempt(s): {allowed} allowed, "
          f"{len(found) - allowed} refused or waiting")  # fmt: skip
    return 0


def mcp_calls(groups: list[AttemptRecords], as_json: bool) -> int:
    """Every ``mcp`` record (`governor.mcp.relay`): the server, the call, the
    verdict and why; then the calls per server."""
    found = [
        {
            "attempt": g.attempt,
            "log": g.source,
            "seq": r.get("seq"),
            "time": r.get("time"),
            "server": (r.get("subject") or {}).get("server"),
            "method": (r.get("subject") or {}).get("method"),
            "subject": shown(r),
            "verdict": r.get("verdict"),
            "by": r.get("by"),
            "rule": r.get("rule"),
            "reason": r.get("reason"),
        }
        for g in groups
        for r in g.records
        if r.get("kind") == "mcp"
    ]
    if as_json:
        print(json.dumps(found, indent=1, ensure_ascii=False))
        return 0
    if not found:
        print(f"no MCP call in {len(groups)} attempt(s)")
        return 0
    servers: dict[str, list[int]] = {}
    for x in found:
        verdict = str(x["verdict"] or "-")
        # a log's fields hold the agent's and the server's words: one terminal-safe line each
        print(terminal(f"{x['attempt']} #{x['seq']} {verdict:<8} {x['method']}: {x['subject']}"))
        print(terminal(f"    {x['by']} [{x['rule']}]: {x['reason']}"))
        counts = servers.setdefault(str(x["server"]), [0, 0])
        counts[0 if verdict == "allow" else 1] += 1
    print()
    for server, (allowed, other) in servers.items():
        print(terminal(f"{server}: {allowed + other} call(s), {allowed} allowed, {other} refused or waiting"))
    return 0


def check_runs(groups: list[AttemptRecords], as_json: bool) -> int:
    """Every ``check`` record: the command run after an attempt, its verdict,
    exit status and duration (its output's tail with ``--json``)."""
    found = [
        {
            "attempt": g.attempt,
            "log": g.source,
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
        for g in groups
        for r in g.records
        if r.get("kind") == "check"
    ]
    if as_json:
        print(json.dumps(found, indent=1, ensure_ascii=False))
        return 0
    if not found:
        print(f"no check in {len(groups)} attempt(s)")
        return 0
    for x in found:
        how = x["error"] or ("timed out" if x["timed_out"] else f"exit {x['exit']}")
        print(f"{x['attempt']} #{x['seq']} {x['verdict']:<6} {terminal(str(x['command']))} "
              f"({how}, {x['duration_s']} s)")  # fmt: skip
    passed = sum(1 for x in found if x["verdict"] == "passed")
    print(f"\n{len(found)} check(s) in {len(groups)} attempt(s): {passed} passed, "
          f"{len(found) - passed} failed")  # fmt: skip
    return 0


def refusals(groups: list[AttemptRecords], as_json: bool) -> int:
    found = [x for g in groups for x in _refused(g)]
    if as_json:
        print(json.dumps(found, indent=1, ensure_ascii=False))
        return 0
    if not found:
        print(f"nothing was refused in {len(groups)} attempt(s)")
        return 0
    for x in found:
        print(terminal(f"{x['attempt']} #{x['seq']} {x['kind']}: {x['subject']}"))
        print(terminal(f"    refused by {x['by']} [{x['rule']}]: {x['reason']}"))
    print(f"\n{len(found)} refused in {len(groups)} attempt(s)")
    return 0


def find_attempt(groups: list[AttemptRecords], wanted: str) -> AttemptRecords:
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
    if kind == "check":
        how = "timed out" if record.get("timed_out") else f"exit {record.get('exit')}"
        return (
            f"{head} check {shown(record)}: {record.get('verdict')} "
            f"({record.get('error') or how}, {record.get('duration_s')} s)"
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
    return (
        f"{head} {kind}{request}: {shown(record)} -> {record.get('verdict')} by "
        f"{record.get('by')} [{record.get('rule', '')}]{option}: {record.get('reason', '')}"
    )


def story(groups: list[AttemptRecords], wanted: str, as_json: bool) -> int:
    try:
        group = find_attempt(groups, wanted)
    except LookupError as e:
        print(f"governor audit: {e}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(group.records, indent=1, ensure_ascii=False))
        return 0
    start = group.start
    t0 = (start or group.records[0]).get("time")
    when = (
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t0))
        if isinstance(t0, int | float)
        else "?"
    )
    print(terminal(f"attempt {group.attempt} ({group.source}), started {when}"))
    for r in group.records:
        print(terminal(describe(r, t0 if isinstance(t0, int | float) else None)))
    if group.end is None:
        print(f"          {UNFINISHED}")
    return 0


def _choices(groups: list[AttemptRecords], most: int = 20) -> str:
    names = [g.attempt for g in groups]
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


# -- verify ---------------------------------------------------------------------------
