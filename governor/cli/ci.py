"""What an attempt shows on a CI runner: a job summary and annotations.

Where ``GITHUB_STEP_SUMMARY`` names a file (GitHub Actions sets it for every
step), ``governor run`` appends a Markdown summary of the attempt to it: the
status, the tally, each refusal with its rule and reason, the failures (what
no rule refused but could not be done: a name that does not resolve, a host
that does not answer, a request after the turn was over) grouped with their
count, the changes made
without asking, and the audit log's path and head (kept by the runner, apart
from the log: what `governor audit verify --head` checks the log against).
With ``--annotate`` it also prints workflow commands (``::error`` for each refusal, ``::warning`` for each
unasked change), which the runner shows on the run's page. Everything comes
from the outcome and its records in the audit log, masked alike.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Final

from governor.audit.reading import decision_records
from governor.boundary.display import markdown, markdown_code, terminal
from governor.boundary.person_files import open_output
from governor.ending.outcome import Outcome

SUMMARY_VARIABLE: Final = "GITHUB_STEP_SUMMARY"
MAX_ROWS: Final = 200
"""Refusals listed in full; more are counted."""


def refusals(outcome: Outcome) -> list[dict[str, Any]]:
    """The decision records that refused something, read from the attempt's log
    (a failure is not a refusal: `failures`)."""
    records = decision_records(outcome.log, outcome.run_id, outcome.decisions)
    return [r for r in records if r.get("verdict") == "deny" and not r.get("failed")]


def failures(outcome: Outcome) -> list[tuple[dict[str, Any], int]]:
    """The attempt's failures, identical ones (kind, what, what happened,
    reason) grouped: the first record of each group and how many it holds. An
    agent retrying an API that does not resolve makes dozens of them."""
    groups: dict[tuple[str, ...], list[Any]] = {}
    for r in decision_records(outcome.log, outcome.run_id, outcome.decisions):
        if r.get("verdict") == "deny" and r.get("failed"):
            key = (str(r.get("kind")), _what(r), str(r.get("failed")), str(r.get("reason")))
            group = groups.setdefault(key, [r, 0])
            group[1] += 1
    return [(first, count) for first, count in groups.values()]


def _what(record: dict[str, Any]) -> str:
    subject = record.get("subject") or {}
    found = subject.get("command") or subject.get("path") or subject.get("title")
    if not found and subject.get("host"):
        found = f"{subject.get('host')}:{subject.get('port')}"
    return str(found or record.get("kind", ""))


def step_summary(outcome: Outcome) -> str:
    """The attempt as Markdown for the job summary."""
    lines = [f"### acp-governor: {markdown_code(outcome.run_id)} {markdown(outcome.status)}", ""]
    if outcome.reason:
        lines += [f"Reason: {markdown(outcome.reason, 2000)}", ""]
    acp = outcome.acp
    if acp is not None:
        t = acp.tally
        lines += [
            "| asked | allowed | waited | refused | failed | reported | unasked |",
            "|---:|---:|---:|---:|---:|---:|---:|",
            f"| {t.asked} | {t.allowed} | {t.waited} | {t.refused} | {t.failed} | {t.reported} "
            f"| {t.unasked} |",
            "",
        ]
    refused = refusals(outcome)
    if refused:
        lines += [
            "**Refused**",
            "",
            "| seq | kind | what | by | rule | reason |",
            "|---:|---|---|---|---|---|",
        ]
        for r in refused[:MAX_ROWS]:
            lines.append(
                f"| {markdown(r.get('seq', ''))} | {markdown(r.get('kind', ''))} | {markdown(_what(r))} "
                f"| {markdown(r.get('by') or '')} | {markdown(r.get('rule') or '')} "
                f"| {markdown(r.get('reason') or '')} |"
            )
        if len(refused) > MAX_ROWS:
            lines.append(f"| | | {len(refused) - MAX_ROWS} more | | | |")
        lines.append("")
    failed = failures(outcome)
    if failed:
        lines += [
            "**Failed** (no rule refused these: they could not be done)",
            "",
            "| first seq | times | kind | what | failed | reason |",
            "|---:|---:|---|---|---|---|",
        ]
        for r, count in failed[:MAX_ROWS]:
            lines.append(
                f"| {markdown(r.get('seq', ''))} | {count} | {markdown(r.get('kind', ''))} "
                f"| {markdown(_what(r))} | {markdown(r.get('failed'))} | {markdown(r.get('reason') or '')} |"
            )
        if len(failed) > MAX_ROWS:
            lines.append(f"| | | | {len(failed) - MAX_ROWS} more | | |")
        lines.append("")
    unasked = acp.unasked_paths if acp is not None else []
    if unasked:
        lines += ["**Changed without asking**", ""]
        lines += [f"- {markdown_code(path)}" for path in unasked[:MAX_ROWS]]
        lines.append("")
    if outcome.log and outcome.log_head:
        signed = (
            f", its end record signed by key {markdown_code(outcome.log_key)}" if outcome.log_key else ""
        )
        lines += [
            f"Audit log: {markdown_code(outcome.log)}, {markdown(outcome.log_records)} records, head "
            f"{markdown_code(outcome.log_head)}{signed}. This summary is kept apart from the log: "
            f"check the log against it with "
            f"{markdown_code(f'governor audit verify --head {outcome.log_head} LOG')}",
            "",
        ]
    elif outcome.log:
        lines += [
            f"Audit log: {markdown_code(outcome.log)} (check it with <code>governor audit verify</code>)",
            "",
        ]
    return "\n".join(lines) + "\n"


def workflow_commands(outcome: Outcome) -> list[str]:
    """Workflow commands: an error per refusal, a warning per group of identical
    failures and per unasked change."""
    out = [
        f"::error title={_property('acp-governor refused ' + str(r.get('kind', '')))}::"
        f"{_data(_what(r))}: {_data(r.get('reason') or '')}"
        for r in refusals(outcome)[:MAX_ROWS]
    ]
    out += [
        f"::warning title={_property('acp-governor failed ' + str(r.get('kind', '')))}::"
        f"{_data(_what(r))}: {_data(r.get('reason') or '')} ({count} time(s); no rule refused it)"
        for r, count in failures(outcome)[:MAX_ROWS]
    ]
    acp = outcome.acp
    for path in (acp.unasked_paths if acp is not None else [])[:MAX_ROWS]:
        out.append(f"::warning file={_property(path)},title=acp-governor::changed without asking")
    return out


def _data(text: object) -> str:
    """A workflow command's message, escaped as the runner unescapes it, and
    terminal-safe (the runner's log viewer draws ANSI colours)."""
    return terminal(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: object) -> str:
    """A workflow command's property value: its message escapes, and ``:`` and ``,``."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def report(outcome: Outcome, *, annotate: bool) -> None:
    """Append the summary where the runner asks for it; print the annotations."""
    target = os.environ.get(SUMMARY_VARIABLE)
    if target:
        try:
            fd, _ = open_output(target, append=True)  # never through a link
            with os.fdopen(fd, "a", encoding="utf-8") as f:
                f.write(step_summary(outcome))
        except OSError as e:
            print(
                f"governor: cannot append to ${SUMMARY_VARIABLE} ({target}): {e.strerror}",
                file=sys.stderr,
            )
    if annotate:  # on stderr, which the runner reads for commands too: stdout may be JSON
        for line in workflow_commands(outcome):
            print(line, file=sys.stderr, flush=True)
