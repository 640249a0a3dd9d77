"""`governor audit`: read audit logs back -- tallies, refusals, one attempt's story,
verification of the hash chain, and replay under another policy.

    governor audit [--refused | --network | --attempt ID] [--json] LOG|DIR ...
    governor audit verify [--json] [--head HASH ... | --outcomes FILE] [--public-key FILE] LOG|DIR ...
    governor audit replay LOG --policy FILE [--ceiling FILE] [--attempt ID] [--json]
    governor audit report LOG|DIR [--attempt ID] [--head HASH] [--public-key FILE] -o FILE.html
    governor audit keygen KEY

A directory stands for every ``*.jsonl`` file under it; a batch's output
(``governor batch --out DIR``) for its jobs: one row per job and the batch's
total tally. Exit codes: 0 done (a
log that verifies, unfinished attempts included); 1 a log that does not verify,
or no attempt by that id; 2 usage (a missing file, a bad policy, several
attempts and no ``--attempt`` for the page).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from governor.audit.anchor import (
    Anchor,
    Authenticity,
    OutcomesUnreadable,
    authenticate,
    outcome_anchors,
)
from governor.audit.reading import (
    AttemptRecords,
    LogFile,
    LogUnreadable,
    Row,
    is_batch_output,
    log_files,
    read_log,
    read_logs,
    row,
)
from governor.audit.replay import Replay, replay, shown
from governor.audit.signing import PublicKey, SigningUnavailable, keygen
from governor.audit.tally import Tally
from governor.audit.verify import INCOMPLETE, UNFINISHED, Verification

USAGE: Final = """governor audit [--refused | --network | --attempt ID] [--json] LOG|DIR ...
       governor audit verify [--json] [--head HASH ... | --outcomes FILE] [--public-key FILE] LOG|DIR ...
       governor audit replay LOG --policy FILE [--ceiling FILE] [--attempt ID] [--json]
       governor audit report LOG|DIR [--attempt ID] [--head HASH] [--public-key FILE] -o FILE.html
       governor audit keygen KEY"""

EXIT_CODES: Final = """exit codes:
  0  done (the report warns of a log that does not verify; verify reports unfinished
     attempts and a line cut by a crash without failing)
  1  verify: a log does not verify (its first bad line is named), or does not end at
     its head, or an end record's signature does not hold; --attempt: no such id
  2  usage: a missing log, an unreadable or invalid policy; report: several attempts
     and no --attempt (the choices are named)
"""

TALLY_COLUMNS: Final = ("asked", "allowed", "waited", "refused", "reported", "unasked")


class UsageError(Exception):
    """A command line that cannot be carried out (exit 2)."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `audit` subcommand (with its `verify` and `replay` forms)."""
    p = sub.add_parser(
        "audit",
        help="read audit logs: tallies, refusals, one attempt's story, verify, replay",
        description="Read audit logs back. With LOG|DIR: one row per attempt (its agent, "
        "status and tally). `verify` checks the hash chain (exit 1 names the first line "
        "edited, deleted, inserted or reordered); `replay` re-decides every recorded action "
        "under another policy and lists what would change; `report` writes one attempt as a "
        "self-contained HTML page (header, tally chart, refusals, unasked changes, a "
        "filterable timeline, the chain's verification).",
        usage=USAGE,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--refused", action="store_true", help="every refused action, with rule and reason"
    )
    p.add_argument(
        "--network", action="store_true",
        help="every connection through the proxy, with its verdict, rule and reason",
    )
    p.add_argument(
        "--attempt", metavar="ID", help="the full story of one attempt (an id or a unique prefix)"
    )
    p.add_argument("--json", action="store_true", help="JSON on stdout")
    p.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=main)


def _report_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="governor audit", usage=USAGE)
    p.add_argument("paths", nargs="*", metavar="LOG|DIR")
    p.add_argument("--refused", action="store_true")
    p.add_argument("--network", action="store_true")
    p.add_argument("--attempt", metavar="ID")
    p.add_argument("--json", action="store_true")
    return p


def _verify_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="governor audit verify",
        description="Check the hash chain of each log; with --head or --outcomes, that each "
        "attempt's chain ends at the head reported for it (its outcome's log_head); with "
        "--public-key, that each end record is signed by that key. Without either, a log that "
        "verifies is only consistent with itself: whoever can write the file could have "
        "rewritten all of it.",
    )
    p.add_argument("paths", nargs="*", metavar="LOG|DIR")
    p.add_argument("--json", action="store_true", help="JSON on stdout")
    _anchor_options(p)
    p.add_argument(
        "--outcomes",
        metavar="FILE",
        help="a batch's outcomes.jsonl (or one `governor run --json` outcome): check every "
        "job's log against the head on its line",
    )
    return p


def _anchor_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--head",
        metavar="HASH",
        action="append",
        help="an attempt's head (its outcome's log_head); repeat for a log of several attempts: "
        "every attempt must end at one",
    )
    p.add_argument(
        "--public-key",
        metavar="FILE",
        help="the operator's Ed25519 public key (PEM): every finished attempt's end record "
        "must be signed by it",
    )


def _keygen_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="governor audit keygen",
        description="Make an Ed25519 key pair for signing audit logs: KEY (the private key, "
        "PEM, mode 600: the ceiling's audit_key, or the value of "
        "$ACP_GOVERNOR_AUDIT_PRIVATE_KEY) and KEY.pub (for `verify --public-key`). Never "
        "overwrites a file.",
    )
    p.add_argument("key", metavar="KEY")
    return p


def _replay_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="governor audit replay",
        description="Re-decide every recorded permission, read, write, terminal and network action "
        "under another policy (bound to each attempt's own roots) and list what would change.",
    )
    p.add_argument("log", metavar="LOG")
    p.add_argument("--policy", metavar="FILE", required=True, help="the policy to replay under")
    p.add_argument(
        "--ceiling", metavar="FILE", help="whose protected paths apply (default: the one in force)"
    )
    p.add_argument("--attempt", metavar="ID", help="only this attempt")
    p.add_argument("--json", action="store_true", help="JSON on stdout")
    return p


def _page_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="governor audit report",
        description="Write one attempt as a self-contained HTML page (no network, no other "
        "file): its header, the tally as a chart, each refusal with its rule and reason, the "
        "changes made without asking and what explains them, a timeline of every decision "
        "(filter by verdict and kind; report.html#verdict=deny opens filtered) and the "
        "verification of the log's hash chain.",
    )
    p.add_argument("paths", nargs="+", metavar="LOG|DIR")
    p.add_argument(
        "--attempt",
        metavar="ID",
        help="the attempt (an id or a unique prefix); needed when the logs hold several",
    )
    p.add_argument(
        "-o", "--output", metavar="FILE", required=True, help="the page to write ('-': stdout)"
    )
    _anchor_options(p)
    return p


def main(args: argparse.Namespace) -> int:
    """Dispatch to the report, `verify` or `replay`; map errors to exit 2."""
    rest = list(args.args)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    try:
        if rest[:1] == ["verify"]:
            sub = _verify_parser().parse_intermixed_args(rest[1:])
            return run_verify(
                sub.paths,
                as_json=sub.json or args.json,
                heads=sub.head,
                outcomes=sub.outcomes,
                public_key=sub.public_key,
            )
        if rest[:1] == ["keygen"]:
            sub = _keygen_parser().parse_args(rest[1:])
            return run_keygen(sub.key)
        if rest[:1] == ["report"]:
            sub = _page_parser().parse_intermixed_args(rest[1:])
            return run_page(
                sub.paths,
                sub.output,
                attempt=sub.attempt or args.attempt,
                heads=sub.head,
                public_key=sub.public_key,
            )
        if rest[:1] == ["replay"]:
            sub = _replay_parser().parse_args(rest[1:])
            return run_replay(
                sub.log,
                sub.policy,
                ceiling=sub.ceiling,
                attempt=sub.attempt or args.attempt,
                as_json=sub.json or args.json,
            )
        sub = _report_parser().parse_intermixed_args(rest)  # options may follow the logs
        refused, attempt = sub.refused or args.refused, sub.attempt or args.attempt
        if not sub.paths:
            raise UsageError(f"name the logs to read\nusage: {USAGE}")
        network = sub.network or args.network
        if sum(map(bool, (refused, attempt, network))) > 1:
            raise UsageError(
                "--refused, --network and --attempt are different views: choose one"
            )
        return run_report(
            sub.paths,
            refused=refused,
            attempt=attempt,
            network=network,
            as_json=sub.json or args.json,
        )
    except (UsageError, LogUnreadable, OutcomesUnreadable, SigningUnavailable) as e:
        print(f"governor audit: {e}", file=sys.stderr)
        return 2


def _table(rows: list[Row]) -> Iterator[str]:
    header = ("ATTEMPT", "AGENT", "STATUS", *(c.upper() for c in TALLY_COLUMNS), "DURATION")
    body = [
        (
            r.attempt,
            r.agent,
            r.status,
            *(str(getattr(r.tally, c)) for c in TALLY_COLUMNS),
            "?" if r.duration_s is None else f"{r.duration_s:.1f}s" + ("" if r.finished else "+"),
        )
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(header, *body, strict=False)]
    numeric = set(range(3, len(header)))
    for cells in (header, *body):
        yield "  ".join(
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()


def _integrity_notes(logs: list[LogFile]) -> list[str]:
    notes = []
    for log in logs:
        if log.check.problem is not None:
            notes.append(
                f"{log.path} does not verify: {log.check.problem.what} "
                "(see `governor audit verify`)"
            )
        for n in log.check.incomplete:
            notes.append(f"{log.path}: line {n}: {INCOMPLETE}")
    return notes


def run_report(
    paths: Sequence[str],
    *,
    refused: bool = False,
    attempt: str | None = None,
    network: bool = False,
    as_json: bool = False,
) -> int:
    """The summary table, the refusals, the connections, or one attempt's story."""
    if (
        paths
        and not refused
        and not network
        and attempt is None
        and all(is_batch_output(Path(p)) for p in paths)
    ):
        return run_batch_report(paths, as_json=as_json)
    logs = read_logs(paths)
    groups = [g for log in logs for g in log.attempts]
    for note in _integrity_notes(logs):
        print(f"warning: {note}", file=sys.stderr)
    if attempt is not None:
        return _story(groups, attempt, as_json)
    if refused:
        return _refusals(groups, as_json)
    if network:
        return _connections(groups, as_json)
    rows = sorted((row(g) for g in groups), key=lambda r: (r.started or 0.0, r.attempt))
    if as_json:
        print(json.dumps([r.to_json() for r in rows], indent=1, ensure_ascii=False))
        return 0
    if not rows:
        print(f"no attempts in {len(logs)} log(s)")
        return 0
    for line in _table(rows):
        print(line)
    unfinished = sum(1 for r in rows if not r.finished)
    total = Tally(*(sum(getattr(r.tally, c) for r in rows) for c in TALLY_COLUMNS))
    print(
        f"\n{len(rows)} attempt(s) in {len(logs)} log(s); "
        + ", ".join(f"{getattr(total, c)} {c}" for c in TALLY_COLUMNS)
        + (f"; {unfinished} unfinished ({UNFINISHED})" if unfinished else "")
    )
    return 0


# -- a batch's output -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobRow:
    """One finished job of a batch: its outcome line and its attempt's row (None
    when it ended before an attempt: a clone that failed, a refusal)."""

    job: str
    line: dict[str, Any]
    attempt: Row | None
    files: int
    """Files its patch changes."""

    @property
    def tally(self) -> Tally:
        """From the log (as the outcome computes it), else from the outcome line."""
        if self.attempt is not None:
            return self.attempt.tally
        counts = (self.line.get("acp") or {}).get("tally") or {}
        return Tally(**{c: int(counts.get(c, 0)) for c in TALLY_COLUMNS})

    def to_json(self) -> dict[str, Any]:
        """The row as plain JSON values."""
        return {
            "job": self.job,
            "status": self.line.get("status"),
            "reason": self.line.get("reason"),
            "agent": self.attempt.agent if self.attempt else None,
            "tally": asdict(self.tally),
            "duration_s": self.line.get("duration_s"),
            "files_changed": self.files,
            "log": self.line.get("log"),
            "changes": self.line.get("changes"),
        }


def batch_rows(root: Path) -> tuple[list[JobRow], list[LogFile]]:
    """Every finished job of a batch's output, in the order they finished, with
    the logs read (and verified) for them."""
    from governor.batch.output import LOG, PATCH, read_outcomes

    rows: list[JobRow] = []
    logs: list[LogFile] = []
    for job, line in read_outcomes(root).items():
        log = read_log(root / job / LOG)
        logs.append(log)
        attempt = row(log.attempts[-1]) if log.attempts else None
        patch = (root / job / PATCH).read_bytes()
        files = patch.count(b"\ndiff --git ") + patch.startswith(b"diff --git ")
        rows.append(JobRow(job, line, attempt, files))
    return rows, logs


def _batch_table(rows: list[JobRow]) -> Iterator[str]:
    header = ("JOB", "STATUS", "AGENT", *(c.upper() for c in TALLY_COLUMNS), "DURATION", "FILES", "REASON")
    body = []
    for r in rows:
        duration = r.line.get("duration_s")
        reason = str(r.line.get("reason") or "")
        body.append(
            (
                r.job,
                str(r.line.get("status")),
                r.attempt.agent if r.attempt else "-",
                *(str(getattr(r.tally, c)) for c in TALLY_COLUMNS),
                f"{duration:.1f}s" if isinstance(duration, int | float) else "-",
                str(r.files),
                reason if len(reason) <= 60 else reason[:59] + "…",
            )
        )
    widths = [max(len(x) for x in col) for col in zip(header, *body, strict=False)]
    numeric = set(range(3, len(header) - 1))
    for cells in (header, *body):
        yield "  ".join(
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()


def batch_totals(rows: list[JobRow]) -> str:
    """The closing line of a batch's table: jobs by status and the total tally."""
    by_status: dict[str, int] = {}
    for r in rows:
        status = str(r.line.get("status"))
        by_status[status] = by_status.get(status, 0) + 1
    total = Tally(*(sum(getattr(r.tally, c) for r in rows) for c in TALLY_COLUMNS))
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(by_status.items()))
    return (
        f"{len(rows)} job(s): {statuses or 'none finished'}; "
        + ", ".join(f"{getattr(total, c)} {c}" for c in TALLY_COLUMNS)
    )


def print_batch(root: Path, *, as_json: bool = False) -> int:
    """The per-job table of a batch's output and its total tally (or JSON)."""
    rows, logs = batch_rows(root)
    for note in _integrity_notes(logs):
        print(f"warning: {note}", file=sys.stderr)
    if as_json:
        print(json.dumps([r.to_json() for r in rows], indent=1, ensure_ascii=False))
        return 0
    if not rows:
        print(f"no finished job in {root}")
        return 0
    for line in _batch_table(rows):
        print(line)
    print(f"\n{batch_totals(rows)}")
    return 0


def run_batch_report(paths: Sequence[str], *, as_json: bool = False) -> int:
    """`print_batch` for each batch output named."""
    for n, path in enumerate(paths):
        if len(paths) > 1 and not as_json:
            print(("\n" if n else "") + f"{path}:")
        print_batch(Path(path), as_json=as_json)
    return 0


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


def _connections(groups: list[AttemptRecords], as_json: bool) -> int:
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
        print(f"{x['attempt']} #{x['seq']} {x['verdict']:<8} {x['origin']}: {x['subject']}")
        print(f"    {x['by']} [{x['rule']}]: {x['reason']}")
    allowed = sum(1 for x in found if x["verdict"] == "allow")
    print(f"\n{len(found)} connection(s) in {len(groups)} attempt(s): {allowed} allowed, "
          f"{len(found) - allowed} refused or waiting")  # fmt: skip
    return 0


def _refusals(groups: list[AttemptRecords], as_json: bool) -> int:
    found = [x for g in groups for x in _refused(g)]
    if as_json:
        print(json.dumps(found, indent=1, ensure_ascii=False))
        return 0
    if not found:
        print(f"nothing was refused in {len(groups)} attempt(s)")
        return 0
    for x in found:
        print(f"{x['attempt']} #{x['seq']} {x['kind']}: {x['subject']}")
        print(f"    refused by {x['by']} [{x['rule']}]: {x['reason']}")
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


def _story(groups: list[AttemptRecords], wanted: str, as_json: bool) -> int:
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
    print(f"attempt {group.attempt} ({group.source}), started {when}")
    for r in group.records:
        print(describe(r, t0 if isinstance(t0, int | float) else None))
    if group.end is None:
        print(f"          {UNFINISHED}")
    return 0


# -- report: one attempt as an HTML page ----------------------------------------------


def run_page(
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
    bad = [h for h in heads or () if not _HEAD.fullmatch(h)]
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
    for note in _integrity_notes([log]):
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


def run_verify(
    paths: Sequence[str],
    *,
    as_json: bool = False,
    heads: Sequence[str] | None = None,
    outcomes: str | None = None,
    public_key: str | None = None,
) -> int:
    """Exit 0 when every log verifies (unfinished attempts and a cut last line are
    reported, not failures) and, given heads or a key, each attempt ends at its
    head and its end record's signature holds; 1 naming what does not."""
    key = PublicKey.load(public_key) if public_key else None
    targets: list[tuple[Path, list[Anchor] | None]] = []
    if outcomes is not None:
        if heads:
            raise UsageError("--head and --outcomes both give the heads: choose one")
        targets.extend(outcome_anchors(Path(outcomes)).items())
    files = log_files(paths) if paths else []
    if heads:
        if len(files) != 1:
            raise UsageError(
                f"--head anchors one log, and {len(files)} are named: name one file "
                "(a batch's logs: --outcomes OUT/outcomes.jsonl)"
            )
        bad = [h for h in heads if not _HEAD.fullmatch(h)]
        if bad:
            raise UsageError(f"--head {bad[0]!r} is not a head: 64 lowercase hex digits")
    targets.extend((f, [Anchor(h) for h in heads] if heads else None) for f in files)
    if not targets:
        raise UsageError(f"no audit logs in {', '.join(paths)}" if paths else "name the logs to verify")
    results = [_verified(path, anchors, key) for path, anchors in targets]
    failed = sum(1 for r in results if not r.ok)
    if as_json:
        print(json.dumps([r.to_json() for r in results], indent=1))
        return 1 if failed else 0
    for r in results:
        for line in r.lines():
            print(line)
    return 1 if failed else 0


_HEAD: Final = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class _Verified:
    """One log's verification and what vouches for it; ``check`` None: the log is missing."""

    path: Path
    check: Verification | None
    auth: Authenticity

    @property
    def ok(self) -> bool:
        return self.check is not None and self.check.problem is None and self.auth.ok

    def to_json(self) -> dict[str, Any]:
        check = self.check
        return {
            "log": str(self.path),
            "intact": check is not None and check.problem is None,
            "problem": None
            if check is None or check.problem is None
            else asdict(check.problem),
            "authentic": self.ok and bool(self.auth.checked),
            "checked_against": list(self.auth.checked),
            "anchor_problems": list(self.auth.problems),
            "held": list(self.auth.held),
            "notes": list(self.auth.notes),
            "unfinished": list(check.unfinished) if check else [],
            "incomplete": list(check.incomplete) if check else [],
            "attempts": check.attempts if check else 0,
            "records": check.records if check else 0,
        }

    def lines(self) -> Iterator[str]:
        path, check, auth = self.path, self.check, self.auth
        if check is None:
            yield f"{path}: TAMPERED: " + "; ".join(auth.problems)
            return
        if check.problem is not None:
            yield f"{path}: TAMPERED: {check.problem.what}"
        elif auth.problems:
            yield from (f"{path}: TAMPERED: {p}" for p in auth.problems)
        else:
            counts = f"{check.records} line(s), {check.attempts} attempt(s)"
            yield (
                f"{path}: intact, {auth.label()} ({counts})"
                if auth.checked
                else f"{path}: intact, not anchored ({counts}): nothing outside the file vouches "
                "for it (check it with --head, --outcomes or --public-key)"
            )
        yield from (f"{path}: {h}" for h in auth.held)
        yield from (f"{path}: {n}" for n in auth.notes)
        for n in check.incomplete:
            yield (
                f"{path}: line {n}: {INCOMPLETE}"
                if n == check.records
                else f"{path}: line {n}: incomplete (the governor stopped while writing it; a new attempt follows)"
            )
        for attempt in check.unfinished:
            yield f"{path}: attempt {attempt}: {UNFINISHED}"


def _verified(path: Path, anchors: list[Anchor] | None, key: PublicKey | None) -> _Verified:
    if anchors is not None and not path.is_file():
        named = ", ".join(a.source for a in anchors) or "the outcomes"
        return _Verified(path, None, Authenticity(problems=[f"the log is missing ({named} names it)"]))
    check = read_log(path, {a.head for a in anchors or ()}).check
    if check.problem is not None:
        return _Verified(path, check, Authenticity())
    return _Verified(path, check, authenticate(check, anchors=anchors, key=key))


def run_keygen(key: str) -> int:
    """Write a new signing key pair (`governor.audit.signing.keygen`)."""
    public, key_id = keygen(Path(key))
    print(f"wrote {key} (the private key, mode 600) and {public}: key {key_id}")
    print(
        "sign with it: the ceiling's audit_key = \"<absolute path of the key>\", or its "
        "text in $ACP_GOVERNOR_AUDIT_PRIVATE_KEY (a CI secret); verify with "
        f"`governor audit verify --public-key {public} LOG`"
    )
    return 0


# -- replay -----------------------------------------------------------------------------


def run_replay(
    log: str,
    policy_file: str,
    *,
    ceiling: str | None = None,
    attempt: str | None = None,
    as_json: bool = False,
) -> int:
    """List what would change if the log's actions were decided under another policy."""
    from governor.ceilings import load_ceiling
    from governor.policyfile import read_policy
    from policies.errors import ConfigError

    try:
        policy = read_policy(policy_file)
        protected = load_ceiling(ceiling).protected
    except ConfigError as e:
        raise UsageError(str(e)) from None
    files = log_files([log])
    logged = read_log(files[0]) if len(files) == 1 else None
    if logged is None:
        raise UsageError(f"replay reads one log file, not {log}")
    if logged.check.problem is not None:
        print(
            f"warning: {log} does not verify ({logged.check.problem.what}); replaying what it says",
            file=sys.stderr,
        )
    groups = logged.attempts
    if attempt is not None:
        try:
            groups = [find_attempt(groups, attempt)]
        except LookupError as e:
            print(f"governor audit: {e}", file=sys.stderr)
            return 1
    wanted = {g.attempt for g in groups}
    numbered = [(n, r) for n, r in logged.numbered if r.get("attempt") in wanted]
    results = replay(numbered, policy, protected=protected)
    if as_json:
        print(json.dumps([_replay_json(r) for r in results], indent=1, ensure_ascii=False))
        return 0
    for r in results:
        _print_replay(r, policy_file)
    return 0


def _replay_json(r: Replay) -> dict[str, Any]:
    return {
        "attempt": r.attempt,
        "actions": r.actions,
        "changes": [asdict(c) | {"change": c.label} for c in r.changes],
        "skipped": list(r.skipped),
        "unaffected": r.unaffected,
    }


def _print_replay(r: Replay, policy_file: str) -> None:
    print(f"attempt {r.attempt}: {r.actions} action(s) re-decided under {policy_file}")
    for c in r.changes:
        note = " (approximate: an older record without the raw input)" if c.approximate else ""
        print(f"  line {c.line} #{c.seq} {c.kind}: {c.subject}")
        print(f"      {c.label} [{c.rule}]: {c.reason}{note}")
    for s in r.skipped:
        print(f"  not replayed: {s}")
    if r.unaffected:
        print(
            f"  {r.unaffected} decision(s) no policy makes (model, mode, settings, forms) "
            "stay as they were"
        )
    if not r.changes:
        print("  nothing would change")
    else:
        counts: dict[str, int] = {}
        for c in r.changes:
            counts[c.label] = counts.get(c.label, 0) + 1
        print("  " + ", ".join(f"{n} {label}" for label, n in sorted(counts.items())))
