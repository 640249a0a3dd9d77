"""`governor audit`'s views of attempts: refusals, connections, one attempt's
story, and the HTML report page."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from governor.audit.anchor import (
    Anchor,
    authenticate,
)
from governor.audit.passes import Checked, records
from governor.audit.reading import (
    AttemptRecords,
    log_files,
    read_log,
)
from governor.audit.replay import shown
from governor.audit.signing import PublicKey
from governor.audit.verify import UNFINISHED
from governor.cli.audit import HEAD, TALLY_COLUMNS, UsageError, integrity_notes
from governor.cli.outcome_json import Streamed, write_json
from governor.display import terminal

A = TypeVar("A", bound="Named")


def _each(logs: Sequence[Checked], attempts: Collection[str] | None = None) -> Iterator[tuple[Checked, dict[str, Any]]]:
    """Every record of the checked logs (of ``attempts`` when given), one at a time."""
    for log in logs:
        for _, record in records(log, attempts):
            yield log, record


def _attempts(logs: Sequence[Checked]) -> int:
    return sum(len(log.attempts) for log in logs)


def _listed(
    found: Iterator[dict[str, Any]], as_json: bool, lines: Callable[[dict[str, Any]], Iterator[str]]
) -> int:
    """Write what a view found as it is found: a JSON array, or each item's lines.
    Returns how many items there were."""
    count = 0

    def counted() -> Iterator[dict[str, Any]]:
        nonlocal count
        for x in found:
            count += 1
            yield x

    if as_json:
        write_json(Streamed(counted()), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return count
    for x in counted():
        for line in lines(x):  # a log's fields hold the agent's words: one terminal-safe line each
            print(terminal(line))
    return count


def connections(logs: Sequence[Checked], as_json: bool) -> int:
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

    count = _listed(found(), as_json, lines)
    if as_json:
        return 0
    if not count:
        print(f"no connection in {_attempts(logs)} attempt(s)")
        return 0
    print(f"\n{count} connection(s) in {_attempts(logs)} attempt(s): {allowed} allowed, "
          f"{count - allowed} refused or waiting")  # fmt: skip
    return 0


def check_runs(logs: Sequence[Checked], as_json: bool) -> int:
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

    count = _listed(found(), as_json, lines)
    if as_json:
        return 0
    if not count:
        print(f"no check in {_attempts(logs)} attempt(s)")
        return 0
    print(f"\n{count} check(s) in {_attempts(logs)} attempt(s): {passed} passed, "
          f"{count - passed} failed")  # fmt: skip
    return 0


def refusals(logs: Sequence[Checked], as_json: bool) -> int:
    """Every refused action, with who refused it, the rule and the reason."""
    found = (
        {
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
        for log, r in _each(logs)
        if r.get("verdict") == "deny"
    )

    def lines(x: dict[str, Any]) -> Iterator[str]:
        yield f"{x['attempt']} #{x['seq']} {x['kind']}: {x['subject']}"
        yield f"    refused by {x['by']} [{x['rule']}]: {x['reason']}"

    count = _listed(found, as_json, lines)
    if as_json:
        return 0
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


def story(logs: Sequence[Checked], wanted: str, as_json: bool) -> int:
    """One attempt's records, each as a line (or the records as JSON), as they
    are read from its log."""
    try:
        found = find_attempt(in_logs(logs), wanted)
    except LookupError as e:
        print(f"governor audit: {e}", file=sys.stderr)
        return 1
    told = (r for _, r in records(found.log, {found.attempt}))
    if as_json:
        write_json(Streamed(told), sys.stdout, indent=1)
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


# -- report: one attempt as an HTML page ----------------------------------------------


def run_html_report(
    paths: Sequence[str],
    output: str,
    *,
    attempt: str | None = None,
    heads: Sequence[str] | None = None,
    public_key: str | None = None,
) -> int:
    """Write one attempt's page (`governor.audit.report`) to ``output``, saying what
    its log was checked against (``heads``, ``public_key``). Exit 1 for an id that
    names no attempt (or several), 2 for several attempts and no id; both name
    the choices."""
    key = PublicKey.load(public_key) if public_key else None
    bad = [h for h in heads or () if not HEAD.fullmatch(h)]
    if bad:
        raise UsageError(f"--head {bad[0]!r} is not a head: 64 lowercase hex digits")
    from governor.audit.report import render
    from governor.secrets import Masker

    if heads and len(log_files(paths)) != 1:
        raise UsageError("--head anchors one log: name one file")
    logs = [read_log(p, set(heads or ())) for p in log_files(paths)]
    owner = {id(g): log for log in logs for g in log.attempts}
    groups = [g for log in logs for g in log.attempts]
    if not groups:
        raise UsageError(f"no attempts in {', '.join(paths)}")
    if attempt is None:
        if len(groups) > 1:
            raise UsageError(
                f"the logs hold {len(groups)} attempts: choose one with --attempt ID "
                f"({_choices(groups)})"
            )
        group = groups[0]
    else:
        try:
            group = find_attempt(groups, attempt)
        except LookupError as e:
            print(f"governor audit: {e}; the attempts: {_choices(groups)}", file=sys.stderr)
            return 1
    log = owner[id(group)]
    for note in integrity_notes([log]):
        print(f"warning: {note}", file=sys.stderr)
    # The records are masked as written; the log's name is the one thing the page adds.
    masked = Masker.from_environ(os.environ).text
    auth = authenticate(
        log.check, anchors=[Anchor(h) for h in heads] if heads else None, key=key
    )
    for problem in auth.problems:
        print(f"warning: {log.path}: {problem}", file=sys.stderr)
    page = render(group, log.check, log_name=masked(str(log.path)), authenticity=auth)
    if output == "-":
        sys.stdout.write(page)
        return 0
    try:
        Path(output).write_text(page, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"{output}: cannot write the page: {e.strerror}") from None
    print(f"wrote {output}: attempt {group.attempt}, {len(group.records)} record(s)")
    return 0


def _choices(groups: list[AttemptRecords], most: int = 20) -> str:
    names = [g.attempt for g in groups]
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


# -- verify ---------------------------------------------------------------------------
