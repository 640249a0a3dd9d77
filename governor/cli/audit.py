"""`governor audit`: read audit logs back -- tallies, refusals, one attempt's story,
verification of the hash chain, and replay under another policy.

    governor audit [--refused | --network | --checks | --mcp | --attempt ID] [--json] LOG|DIR ...
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
import functools
import os
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from governor.audit.anchor import (
    OutcomesUnreadable,
)
from governor.audit.read_in_passes import Checked, check_log
from governor.audit.read_in_passes import rows as attempt_rows
from governor.audit.reading import (
    BATCH_OUTCOMES,
    LogFile,
    LogMalformed,
    LogUnreadable,
    Row,
    is_batch_output,
    job_problem,
    log_files,
)
from governor.audit.record_shape import outcome_malformed
from governor.audit.signing import SigningUnavailable
from governor.audit.tally import WORDS, Tally
from governor.audit.verify import INCOMPLETE, UNFINISHED
from governor.boundary.display import terminal
from governor.cli.audit_common import TALLY_COLUMNS, UsageError, job_lines
from governor.cli.outcome_json import listing, write_json
from governor.policies.errors import clipped

USAGE: Final = """governor audit [--refused | --network | --checks | --mcp | --attempt ID] [--json] LOG|DIR ...
       governor audit verify [--json] [--head HASH ... | --outcomes FILE] [--public-key FILE] LOG|DIR ...
       governor audit replay LOG --policy FILE [--ceiling FILE] [--attempt ID] [--json]
       governor audit report LOG|DIR [--attempt ID] [--head HASH] [--public-key FILE] -o FILE.html
       governor audit keygen KEY"""

EXIT_CODES: Final = """exit codes:
  0  done (the report warns of a log that does not verify; verify reports unfinished
     attempts and a line cut by a crash without failing, unless --public-key is given)
  1  verify: a log does not verify (its first bad line is named), or does not end at
     its head, or an end record's signature does not hold, or with --public-key an
     attempt has no end record (no signature covers it); --attempt: no such id;
     every reader: a log or outcomes line of a shape the governor never writes (a
     crafted or corrupt file: the file, the line and the field are named)
  2  usage: a missing log, an unreadable or invalid policy; report: several attempts
     and no --attempt (the choices are named)
"""

TALLY_HELP: Final = "the tally's words:\n" + "".join(
    textwrap.fill(text, 88, initial_indent=f"  {word:<9} ", subsequent_indent=" " * 12) + "\n"
    for word, text in WORDS.items()
)
"""`WORDS` as `governor audit --help` prints them, before its exit codes."""
TABLE_ROWS: Final = 2000
"""Attempts the table shows (the newest); past them a line says how many more."""
WORKSPACE_WIDTH: Final = 48
"""A workspace's characters in the table: its last ones, where its name is."""


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
        epilog=f"{TALLY_HELP}\n{EXIT_CODES}",
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
        "--checks", action="store_true",
        help="every check run after an attempt, with its verdict, exit status and duration",
    )
    p.add_argument(
        "--mcp", action="store_true",
        help="per attempt, its MCP servers (command, writable, network), the tools each "
        "offered (and those hidden), every MCP call decided with its verdict, rule and reason",
    )
    p.add_argument(
        "--attempt", metavar="ID", help="the full story of one attempt (an id or a unique prefix)"
    )
    p.add_argument("--json", action="store_true", help="JSON on stdout")
    p.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=main)


@functools.cache  # built once a process: argparse's set-up costs more than a small log's read
def _report_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="governor audit", usage=USAGE)
    p.add_argument("paths", nargs="*", metavar="LOG|DIR")
    p.add_argument("--refused", action="store_true")
    p.add_argument("--network", action="store_true")
    p.add_argument("--checks", action="store_true")
    p.add_argument("--mcp", action="store_true")
    p.add_argument("--attempt", metavar="ID")
    p.add_argument("--json", action="store_true")
    return p


@functools.cache
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


@functools.cache
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


@functools.cache
def _replay_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="governor audit replay",
        description="Re-decide every recorded permission, read, write, terminal and network action "
        "under another policy (bound to each attempt's own roots) and list what would change.",
    )
    p.add_argument("log", metavar="LOG")
    p.add_argument(
        "--policy", metavar="FILE|NAME", required=True,
        help="the policy to replay under (a file, or a shipped policy by name)",
    )  # fmt: skip
    p.add_argument(
        "--ceiling", metavar="FILE", help="whose protected paths apply (default: the one in force)"
    )
    p.add_argument("--attempt", metavar="ID", help="only this attempt")
    p.add_argument("--json", action="store_true", help="JSON on stdout")
    return p


@functools.cache
def _page_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="governor audit report",
        description="Write one attempt as a self-contained HTML page (no network, no other "
        "file): its header, the tally as a chart, each refusal with its rule and reason, the "
        "changes made without asking and what explains them, a timeline of every decision "
        "(filter by verdict and kind; report.html#verdict=deny opens filtered) and the "
        "verification of the log's hash chain. Given a batch's output folder (governor batch "
        "--out OUT), one page with a row per job linking to each job's page, written beside it "
        "as FILE.JOB.html. The log is read once, streaming; a table holds its first 2,000 rows.",
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
    """Dispatch to the report, `verify` or `replay`; map errors to exit codes."""
    return answered(functools.partial(_dispatch, args))


def answered(reader: Callable[[], int]) -> int:
    """Run one of `governor audit`'s readers, its errors printed as one line and
    answered with their exit code: 1 a log or outcomes line of a shape the
    governor never writes, 2 usage (a missing log, a bad policy, ...)."""
    try:
        return reader()
    except LogMalformed as e:
        print(f"governor audit: {e}", file=sys.stderr)
        return 1
    except (UsageError, LogUnreadable, OutcomesUnreadable, SigningUnavailable) as e:
        print(f"governor audit: {e}", file=sys.stderr)
        return 2


def _dispatch(args: argparse.Namespace) -> int:
    # the views and checks import the report page and the signing library: only
    # the command that needs them pays for them
    from governor.cli.audit_checks import run_keygen, run_replay, run_verify
    from governor.cli.audit_report import run_html_report

    rest = list(args.args)
    if rest[:1] == ["--"]:
        rest = rest[1:]
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
        return run_html_report(
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
    if not sub.paths:  # the logs `governor run` writes when --log is not given
        from governor.job.spec import default_log_dir

        state = default_log_dir()
        if not state.is_dir():
            raise UsageError(f"no logs in {state} (governor run writes there); name the logs to read\nusage: {USAGE}")
        print(f"governor audit: the logs in {state}", file=sys.stderr)
        sub.paths = [str(state)]
    network = sub.network or args.network
    checks = sub.checks or args.checks
    mcp = sub.mcp or args.mcp
    if sum(map(bool, (refused, attempt, network, checks, mcp))) > 1:
        raise UsageError(
            "--refused, --network, --checks, --mcp and --attempt are different views: choose one"
        )
    return run_table(
        sub.paths,
        refused=refused,
        attempt=attempt,
        network=network,
        checks=checks,
        mcp=mcp,
        as_json=sub.json or args.json,
    )


def _where(workspace: str | None) -> str:
    """A workspace as the table shows it: the home as ``~``, a long path cut
    at its start (its end names it), ``?`` when the log does not say."""
    if not workspace:
        return "?"
    home = os.path.expanduser("~")
    if home not in ("", "/") and (workspace == home or workspace.startswith(home + "/")):
        workspace = "~" + workspace[len(home):]
    return workspace if len(workspace) <= WORKSPACE_WIDTH else "..." + workspace[3 - WORKSPACE_WIDTH:]


def _table(rows: list[Row]) -> Iterator[str]:
    header = ("ATTEMPT", "AGENT", "STATUS", *(c.upper() for c in TALLY_COLUMNS), "DURATION", "WORKSPACE")
    body = [
        (
            r.attempt,
            r.agent,
            r.status,
            *(str(getattr(r.tally, c)) for c in TALLY_COLUMNS),
            "?" if r.duration_s is None else f"{r.duration_s:.1f}s" + ("" if r.finished else "+"),
            _where(r.workspace),
        )
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(header, *body, strict=False)]
    numeric = set(range(3, len(header) - 1))
    for cells in (header, *body):  # a crafted log's fields reach the terminal as text
        yield terminal("  ".join(
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip())


def integrity_notes(logs: Sequence[LogFile | Checked]) -> list[str]:
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


def run_table(
    paths: Sequence[str],
    *,
    refused: bool = False,
    attempt: str | None = None,
    network: bool = False,
    checks: bool = False,
    mcp: bool = False,
    as_json: bool = False,
) -> int:
    """The summary table, the refusals, the connections, the checks, the MCP
    calls, or one attempt's story."""
    from governor.cli.audit_views import check_runs, connections, mcp_calls, refusals, story

    if (
        paths
        and not refused
        and not network
        and not checks
        and not mcp
        and attempt is None
        and all(is_batch_output(Path(p)) for p in paths)
    ):
        return run_batch_table(paths, as_json=as_json)
    logs = [check_log(p) for p in log_files(paths)]  # every shape checked before anything is shown
    notes = integrity_notes(logs)
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    if attempt is not None:
        return story(logs, attempt, as_json, notes)
    if refused:
        return refusals(logs, as_json, notes)
    if network:
        return connections(logs, as_json, notes)
    if checks:
        return check_runs(logs, as_json, notes)
    if mcp:
        return mcp_calls(logs, as_json, notes)
    # newest first, as `git log`: the attempt one looks for is most often the last
    rows = sorted(
        (r for log in logs for r in attempt_rows(log)),
        key=lambda r: (r.started or 0.0, r.attempt),
        reverse=True,
    )
    if as_json:
        write_json(listing("attempts", (r.to_json() for r in rows), notes), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    if not rows:
        print(f"no attempts in {len(logs)} log(s)")
        return 0
    for line in _table(rows[:TABLE_ROWS]):
        print(line)
    unfinished = sum(1 for r in rows if not r.finished)
    total = Tally(*(sum(getattr(r.tally, c) for r in rows) for c in TALLY_COLUMNS))
    if len(rows) > TABLE_ROWS:
        print(f"... and {len(rows) - TABLE_ROWS:,} older attempt(s): the totals count them; "
              "--json lists every one, --attempt ID tells one")  # fmt: skip
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


def batch_rows(root: Path) -> tuple[list[JobRow], list[Checked]]:
    """Every finished job of a batch's output, in the order they finished, with
    the logs checked for them (each read in passes, none held). A job name that
    is no folder of the batch's (``../x``, a path, a link) is `LogMalformed`
    naming its line: nothing outside the folder is read."""
    from governor.batch.output import LOG, PATCH, read_outcomes

    outcomes = root / BATCH_OUTCOMES
    lines = job_lines(root, (LOG, PATCH))
    rows: list[JobRow] = []
    logs: list[Checked] = []
    for job, line in read_outcomes(root).items():
        wrong = outcome_malformed(line)
        if wrong is not None:
            raise LogMalformed(outcomes, lines.get(job, 0), f"job {terminal(job)}: {wrong}")
        named = Path(str(line.get("log") or LOG)).name  # with tries: the last try's log
        chosen = named if named.startswith("audit.") and (root / job / named).is_file() else LOG
        wrong = job_problem(root, job, (chosen,)) if chosen != LOG else None
        if wrong is not None:
            raise LogMalformed(outcomes, lines.get(job, 0), f"job {terminal(job)}: {wrong}")
        log = check_log(root / job / chosen)
        logs.append(log)
        summed = attempt_rows(log)
        files = patch_files(root / job / PATCH)
        rows.append(JobRow(job, line, summed[-1] if summed else None, files))
    return rows, logs


_FILE_HEADER: Final = b"\ndiff --git "


def patch_files(path: Path) -> int:
    """How many files a patch changes (its ``diff --git`` headers), read a chunk
    at a time: a batch's patch may be hundreds of MB, and its summary must not
    hold it (the batch streamed it to disk for that reason)."""
    count, tail = 0, b"\n"  # the file's start counts as a line's
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            data = tail + chunk
            count += data.count(_FILE_HEADER)
            tail = data[-(len(_FILE_HEADER) - 1) :]
    return count




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
                clipped(reason, 60),
            )
        )
    widths = [max(len(x) for x in col) for col in zip(header, *body, strict=False)]
    numeric = set(range(3, len(header) - 1))
    for cells in (header, *body):  # a crafted log's fields reach the terminal as text
        yield terminal("  ".join(
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip())


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


def print_batch(root: Path) -> int:
    """The per-job table of a batch's output and its total tally."""
    rows, logs = batch_rows(root)
    for note in integrity_notes(logs):
        print(f"warning: {note}", file=sys.stderr)
    if not rows:
        print(f"no finished job in {root}")
        return 0
    for line in _batch_table(rows):
        print(line)
    print(f"\n{batch_totals(rows)}")
    return 0


def run_batch_table(paths: Sequence[str], *, as_json: bool = False) -> int:
    """`print_batch` for each batch output named; with ``as_json`` one document
    listing the jobs of all of them, each naming its output folder."""
    if as_json:
        jobs: list[dict[str, Any]] = []
        notes: list[str] = []
        for path in paths:
            rows, logs = batch_rows(Path(path))
            notes.extend(integrity_notes(logs))
            jobs.extend({"out": path, **r.to_json()} for r in rows)
        for note in notes:
            print(f"warning: {note}", file=sys.stderr)
        write_json(listing("jobs", jobs, notes), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    for n, path in enumerate(paths):
        if len(paths) > 1:
            print(("\n" if n else "") + f"{path}:")
        print_batch(Path(path))
    return 0
