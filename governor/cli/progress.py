"""What a person sees of an attempt: one line per event as it happens, then a summary.

Lines, not animation: they read the same in a terminal, a CI log or a pipe.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from governor.attempt.budget import usage_line
from governor.boundary.display import paint, terminal, terminal_lines, wants_colour
from governor.boundary.secrets import Masker
from governor.checks.check_values import CheckRun
from governor.ending.outcome import Outcome

_MARK = {"allow": "allowed", "deny": "REFUSED", "approval": "PAUSED until a person approves"}
_MARK_STYLE = {"allow": "good", "deny": "bad", "approval": "heed"}
STATUS_STYLE = {"completed": "good", "failed": "bad", "incomplete": "bad", "blocked": "heed",
                "needs_approval": "heed", "passed": "good"}  # fmt: skip
"""The colour of each status and verdict word on a terminal."""
_PLAN_MARKS = {"completed": "x", "in_progress": ">", "pending": " "}


class Progress:
    """An ``on_event`` callback that prints the plan, each decision and the time;
    given a ``masker`` (``--verbose``), also what the agent says, masked, and
    each tool call it reports."""

    def __init__(self, out: TextIO, masker: Masker | None = None) -> None:
        self.out = out
        self.colour = wants_colour(out)
        self.started = time.monotonic()
        self.plan: list[tuple[str, str]] = []
        self.masker = masker
        self._said: list[str] = []  # the agent's message arrives in chunks: one line block when it ends

    def _line(self, text: str) -> None:
        elapsed = time.monotonic() - self.started
        print(f"[{elapsed:6.1f}s] {text}", file=self.out, flush=True)

    def said(self) -> None:
        """Print what the agent said since the last event (its last message has no
        event after it: the caller says when the attempt is over)."""
        if self.masker is None or not self._said:
            return
        text, self._said = self.masker.text("".join(self._said)).strip(), []
        for k, line in enumerate(terminal_lines(text) if text else []):
            self._line(("says       " if k == 0 else " " * 11) + terminal(line))

    def __call__(self, kind: str, info: dict[str, Any]) -> None:
        if kind == "message":
            if self.masker is not None:
                self._said.append(str(info.get("text", "")))
            return
        self.said()
        if kind == "attempt":
            # the clock of the attempt (and of each try), as the summary's duration counts
            self.started = time.monotonic()
        elif kind == "tool_call":
            if self.masker is not None:
                title = self.masker.text(str(info.get("title") or info.get("kind") or "?"))
                self._line(f"tool       {terminal(title)}: {terminal(info.get('status'))}")
        elif kind == "spawned":
            self._line(f"started {info.get('agent')}")
        elif kind == "fetching":
            self._line(fetching_line(info))
        elif kind == "plan":
            plan = [
                (str(e.get("content", "")), str(e.get("status", "pending")))
                for e in info.get("entries", [])
                if isinstance(e, dict)
            ]
            if plan != self.plan:
                # the whole plan when it is new or reshaped; else only the entries that moved
                same_shape = [c for c, _ in plan] == [c for c, _ in self.plan]
                moved = [e for e, old in zip(plan, self.plan, strict=False) if e != old]
                shown = moved if same_shape else plan
                self.plan = plan
                self._line(
                    "plan: "
                    + "  ".join(f"[{_PLAN_MARKS.get(s, ' ')}] {terminal(c)}" for c, s in shown)
                )
        elif kind in ("permission", "read", "write", "terminal"):
            subject = info.get("subject", {})
            what = subject.get("command") or subject.get("path") or subject.get("title") or ""
            word = info.get("verdict", "")
            verdict = paint(_MARK.get(word, word), _MARK_STYLE.get(word, "quiet"), self.colour)
            # a paused ask is decided by nobody yet: its record's `by` (unattended)
            # says who was there, not who decided
            by = "" if info.get("verdict") == "approval" else f" by {info.get('by')}"
            extra = f" ({terminal(info.get('reason'))})" if info.get("verdict") != "allow" else ""
            self._line(f"{kind:10} {terminal(what)}: {verdict}{by}{extra}")
        elif kind == "waiting":
            self._line(f"asking: {terminal(pending_text(info))}")
        elif kind == "check":
            how = "timed out" if info.get("timed_out") else f"exit {info.get('exit')}"
            verdict = str(info.get("verdict"))
            verdict = paint(verdict, STATUS_STYLE.get(verdict, "bad"), self.colour)
            self._line(f"check      {terminal(info.get('command'))}: {verdict} ({how})")
        elif kind == "try":
            self._line(f"try        {info.get('try')} of {info.get('of')}")
        elif kind == "unasked":
            subject = info.get("subject", {})
            unasked = paint("UNASKED", "heed", self.colour)
            self._line(f"{unasked}    {terminal(subject.get('title') or subject.get('path'))}")


def fetching_line(info: dict[str, Any]) -> str:
    """A first npx start's line: what is fetched, and why nothing else shows yet."""
    return (
        f"fetching {terminal(info.get('package'))} for {terminal(info.get('agent'))} with npm "
        "(its first start through npx: this can take a minute; later starts use the cache)"
    )


SHOWN_FINDINGS = 10
"""Tamper findings shown in the summary; the JSON outcome holds them all."""


def pending_text(pending: dict[str, Any]) -> str:
    """The ask that paused an attempt (or waits) in words: its kind, what it
    names (a command, paths, a title) and why it waits; the audit log holds it
    whole."""
    subject = pending.get("subject")
    if isinstance(subject, str):  # a ``waiting`` event's subject, shown already
        subject = {"title": subject}
    subject = subject if isinstance(subject, dict) else {}
    command = subject.get("command")
    if isinstance(command, list):
        command = " ".join(map(str, command))
    paths = subject.get("paths") or ([subject["path"]] if subject.get("path") else [])
    named = command or subject.get("title") or ""
    if paths and not command:
        named = f"{named} ({', '.join(map(str, paths))})" if named else ", ".join(map(str, paths))
    reason = pending.get("reason")
    return f"{pending.get('kind', 'request')} {named or '(no subject)'}" + (
        f": {reason}" if reason else ""
    )


SHOWN_CHANGED = 10
"""Changed files named in the summary; the JSON outcome lists them all."""


def _tests_line(tests: dict[str, Any]) -> str:
    """The acceptance tests in one line: how many passed, and the first that did not."""
    line = f"{tests.get('passed', 0)} of {tests.get('acceptance', 0)} acceptance test(s) passed"
    if tests.get("source") == "frozen":
        line += " (the frozen files' tests)"
    not_passed = tests.get("not_passed") or []
    if not_passed:
        first = not_passed[0]
        more = len(not_passed) - 1 + int(tests.get("more_not_passed", 0))
        line += f"; {first.get('outcome')}: {first.get('test')}" + (f" and {more} more" if more else "")
    if tests.get("held_out_not_passed"):
        line += f"; {tests['held_out_not_passed']} of {tests.get('held_out', 0)} held-out test(s) not passed"
    if tests.get("failed_elsewhere"):
        line += f"; {len(tests['failed_elsewhere'])} other test(s) failed"
    elif tests.get("failed_elsewhere_count"):
        line += f"; {tests['failed_elsewhere_count']} other test(s) failed"
    if tests.get("unfinished_runs"):
        line += f"; {tests['unfinished_runs']} test run(s) ended without reporting"
    return line


def _check_line(c: CheckRun) -> str:
    """One check: passed or failed, how it ended, and its output's last line."""
    if c.error is not None:
        how = c.error
    elif c.timed_out:
        how = f"killed at its timeout after {c.duration_s:.1f} s"
    else:
        how = f"exit {c.exit}, {c.duration_s:.1f} s"
        if c.passed and c.exit != 0:  # governor.checks.canaries: its must-fail ones failed, as they must
            how = f"exit {c.exit}: the canaries' failures only, {c.duration_s:.1f} s"
    last = next((line for line in reversed(c.tail.splitlines()) if line.strip()), "")
    said = f": {last[-200:]}" if last and not c.passed else ""
    return f"{'passed' if c.passed else 'FAILED'} {c.command} ({how}){said}"


def summary(outcome: Outcome, colour: bool = False) -> str:
    """The summary table of an outcome; with `colour`, its status and verdict
    in their colours (`STATUS_STYLE`)."""
    rows: list[tuple[str, str]] = [("status", outcome.status)]
    if outcome.reason:
        rows.append(("reason", outcome.reason))
    if outcome.summary:
        rows.append(("summary", outcome.summary))
    acp = outcome.acp
    if acp is not None:
        t = acp.tally
        rows.append(("agent", f"{acp.agent} (preset {acp.preset})"))
        if acp.mode:
            rows.append(
                (
                    "mode",
                    f"{acp.mode.get('id')} ({'asks' if acp.mode.get('asks') else 'decides alone' if acp.mode.get('asks') is False else 'unknown'})",
                )
            )
        rows.append(
            (
                "tally",
                f"asked {t.asked}, allowed {t.allowed}, waited {t.waited}, refused {t.refused}, failed {t.failed}, reported {t.reported}, unasked {t.unasked}",
            )
        )
        if (used := usage_line(outcome.usage)) is not None:
            rows.append(("usage", used))
        if acp.unasked_paths:
            rows.append(("unasked", ", ".join(acp.unasked_paths)))
        for notice in acp.notices:
            rows.append(("notice", notice))
    for f in outcome.findings[:SHOWN_FINDINGS]:
        where = f"{f.path}:{f.line}" if f.line is not None else f.path
        rows.append(("tamper", f"{where} {f.rule}: {f.detail}"))
    if len(outcome.findings) > SHOWN_FINDINGS:
        rows.append(
            ("tamper", f"... and {len(outcome.findings) - SHOWN_FINDINGS} more (--json lists them)")
        )
    if outcome.files_changed:
        shown = ", ".join(outcome.files_changed[:SHOWN_CHANGED])
        more = len(outcome.files_changed) - SHOWN_CHANGED
        rows.append(("changed", f"{shown} and {more} more" if more > 0 else shown))
    rows.extend(kept_rows(outcome))
    if outcome.home_changed:
        shown = ", ".join(outcome.home_changed[:SHOWN_CHANGED])
        more = len(outcome.home_changed) - SHOWN_CHANGED
        rows.append(("home", f"{shown} and {more} more" if more > 0 else shown))
    for c in outcome.checks_run:
        rows.append(("check", _check_line(c)))
    if outcome.tests:
        rows.append(("tests", _tests_line(outcome.tests)))
    if outcome.verdict:
        rows.append(("verdict", outcome.verdict))
    if outcome.pending:
        rows.append(("pending", pending_text(outcome.pending)))
    if outcome.status == "needs_approval":
        rows.append(("next", "nothing was done for it: decide it with governor approve and go "
                     "on with governor resume (the commands below), or allow it in the policy "
                     "(an [allow] rule), or run again with --approvals person"))  # fmt: skip
    if outcome.run_id and outcome.log:  # what `governor audit --attempt` takes
        rows.append(("attempt", outcome.run_id))
    if outcome.log:
        rows.append(("log", outcome.log))
    if outcome.log_head:
        signed = f", signed by key {outcome.log_key}" if outcome.log_key else ""
        rows.append(("head", f"{outcome.log_head} ({outcome.log_records} records{signed})"))
    rows.append(("duration", f"{outcome.duration_s:.1f} s"))
    width = max(len(k) for k, _ in rows)
    # every value may hold the agent's words (reason, summary, paths, notices):
    # one line each, nothing in them acts on the terminal
    styled = {"status", "verdict"} if colour else set()
    return "\n".join(
        f"{k:>{width}}  {paint(terminal(v), STATUS_STYLE.get(v, 'bad'), True) if k in styled else terminal(v)}"
        for k, v in rows
    )


def kept_rows(outcome: Outcome) -> list[tuple[str, str]]:
    """The summary's ``frozen`` and ``held-out`` rows: how many files each set
    held and whether the digest at the end is the start's (a set of nothing is
    refused before start, so a count of 0 here is itself news)."""
    rows = []
    for key, value in (("frozen", outcome.frozen), ("held-out", outcome.held_out)):
        if not value:
            continue
        start, end = value.get("start") or {}, value.get("end")
        same = "the same at the end" if end == start else "DIFFERENT at the end"
        line = f"{start.get('files')} file(s), sha256 {str(start.get('sha256'))[:16]}, {same}"
        if value.get("replaced"):
            line += f"; the agent's {', '.join(value['replaced'])} replaced for the checks"
        rows.append((key, line))
    return rows
