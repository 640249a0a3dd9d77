"""One attempt as one self-contained HTML page: ``governor audit report``.

Rules of this file:

- **Everything from the log is escaped.** Record fields come from the agent (a
  tool's title, a command, a path), so every value reaches the page through
  `escape` (``html.escape``, quotes included: `governor.audit.html_page`, the
  page's frame, style, script and policy), as text or inside a quoted
  attribute. No value from the log is put in the script, the style, a URL or an
  unquoted attribute: the script reads the rows' ``data-*`` attributes and the
  checkboxes' values, and sets only ``hidden`` and text.
- **Self-contained.** No network and no other file: the style and the script
  are inline, the chart is inline SVG, links are ``#`` anchors. The page's
  Content-Security-Policy allows that one style and that one script (by hash)
  and nothing else, so a value that ever slipped past the escaping could
  neither run nor fetch.
- **Nothing added unmasked.** The values are the log's, masked when they were
  written (a command's output tail and a write's diff too: `governor.audit.effects`);
  what the page adds besides them (the log's name, a batch job's patch lines)
  the caller masks.
- **Read once, bounded.** The attempt comes folded from its log in one
  streaming pass (`governor.audit.page_source`: verified as it is read, the
  first `PAGE_ROWS` rows of each table kept, the rest counted); the tally is
  `Tallier`'s, as the outcome computes it.
- **Readable at any width.** A viewport tag; wide tables scroll inside their
  own box (drawn only when near the window), never the page; the tally's
  counts have a column of their own (tested in Chromium at 400 and 1,400 px).

The timeline filters by verdict and kind with checkboxes; the URL's fragment
holds the filter (``report.html#verdict=deny&kind=permission,terminal``), so a
filtered view can be linked to, and opening such a link applies it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any, Final

from governor.audit import model_section
from governor.audit.anchor import Authenticity
from governor.audit.html_page import badges, document, escape, json_text
from governor.audit.page_source import AttemptPage
from governor.audit.replay import shown
from governor.audit.tally import Tally, verdict_of
from governor.audit.verify import INCOMPLETE, UNFINISHED, Verification

EXPLANATIONS: Final = {
    "named": "the allowed permission's tool call named this path",
    "window": "it changed while an allowed tool call ran (the time rule: "
    "two tool calls at once can fool it)",
}
"""What each `governor.ending.attribution` rule that reaches a ``changed`` record means."""

FIELDS_CHARS: Final = 4000
"""What is shown of a subject's fields folded away under "fields"."""
FILTER_VALUES: Final = 40
"""Checkboxes per filter at most; rarer verdicts and kinds are filtered as one,
``(other)``, so that a crafted log's million kinds make no million boxes."""
OTHER: Final = "(other)"


DiffStat = Mapping[str, tuple[int, int]]
"""Lines added and removed, by absolute path: a batch job's ``changes.patch``
(`governor.audit.batch_page.diff_stat`)."""


def render(
    page: AttemptPage,
    check: Verification,
    *,
    log_name: str,
    authenticity: Authenticity | None = None,
    stats: DiffStat | None = None,
    diffs: Mapping[str, str] | None = None,
) -> str:
    """The page for one attempt: its header with a status badge, the prompt and
    the agent's summary, its usage and notices, the verification of its log's
    chain, its tally chart, refusals (identical ones grouped), changes without
    asking (only what nothing explains), the explained changes (with the
    governed writes' diffs), the commands (exit and output tail) and the
    timeline (with filters).

    ``check`` is the verification of the whole log the attempt was read from,
    ``authenticity`` what it was checked against besides itself (a head, a
    signature; None: nothing, which the page says); ``log_name`` is shown as
    given (the caller masks it); ``stats``, when the workspace's diff is known,
    fills the change column with each file's lines added and removed, and
    ``diffs`` (a batch job's patch, by absolute path, masked) shows each
    change's own lines.
    """
    body = "\n".join(
        [
            f'<h1>Attempt <code>{escape(page.attempt)}</code> {badges(page.status, _verdict(page.end))}</h1>',
            _header(page, log_name),
            _words(page),
            _usage(page.end),
            model_section.section(page.models, page.models_total, page.attempt),
            _verification(page, check, log_name, authenticity or Authenticity()),
            _tally(page.tally, (page.end or {}).get("tally")),
            _refusals(page),
            _failures(page),
            _unasked(page, stats or {}, diffs or {}),
            _changes(page, stats or {}, diffs or {}),
            _commands(page),
            _timeline(page),
        ]
    )
    return document(f"governor audit report: {page.attempt}", body, script=True)


def _verdict(end: Mapping[str, Any] | None) -> str | None:
    verdict = (end or {}).get("verdict")
    return verdict if isinstance(verdict, str) else None


# -- sections --------------------------------------------------------------------------


def _header(page: AttemptPage, log_name: str) -> str:
    start, end = page.start or {}, page.end
    t0 = start.get("time")
    started = (
        time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t0))
        if isinstance(t0, int | float)
        else "?"
    )
    agent = start.get("preset") or start.get("agent") or "?"
    argv = " ".join(map(str, start.get("argv") or []))
    sandboxed = start.get("sandboxed_agent")
    status, reason, duration = page.status, page.reason, page.duration_s
    shown_status = status + (f": {reason}" if reason else "")
    how_long = "?" if duration is None else f"{duration:.3f} s" + ("" if end else " (so far)")
    fields: list[tuple[str, Any]] = [
        ("agent", agent),
        ("argv", argv or None),
        ("capability", start.get("capability")),
        ("approvals", start.get("approvals")),
        ("agent sandboxed", None if sandboxed is None else ("yes" if sandboxed else "NO")),
        ("policy", _digest(start.get("policy"), start.get("policy_source"))),
        ("ceiling", _digest(start.get("ceiling"), start.get("ceiling_source"))),
        ("workspace", start.get("workspace")),
        ("roots", ", ".join(map(str, start.get("roots") or [])) or None),
        ("started", started),
        ("status", shown_status),
        ("checks", _verdict(end)),
        ("duration", how_long),
        ("log", log_name),
    ]
    if not page.start:
        fields.append(("note", "the log holds no attempt-start record for this attempt"))
    items = "".join(
        f"<dt>{escape(name)}</dt><dd>{escape(value)}</dd>" for name, value in fields if value is not None
    )
    css = "good" if status == "completed" else "bad"
    return f'<section id="header"><dl class="{css}">{items}</dl></section>'


def _words(page: AttemptPage) -> str:
    """The task as the operator gave it and the agent's last word on it: the
    prompt (attempt-start) and the summary (attempt-end), or why either is missing."""
    prompt = (page.start or {}).get("prompt")
    if isinstance(prompt, str):
        task = f'<pre id="prompt">{escape(prompt, FIELDS_CHARS)}</pre>'
    else:
        task = '<p id="prompt" class="none">the log does not record the prompt (written by a governor before it did)</p>'
    end = page.end or {}
    summary, reason = end.get("summary"), end.get("reason")
    if isinstance(summary, str):
        said = f'<pre id="summary">{escape(summary, FIELDS_CHARS)}</pre>'
    elif page.status == "blocked" and isinstance(reason, str):  # the agent's BLOCKED: words
        said = f'<pre id="summary">{escape(reason, FIELDS_CHARS)}</pre>'
    elif page.end is None:
        said = '<p id="summary" class="none">the attempt did not finish: no final message</p>'
    else:
        said = '<p id="summary" class="none">no summary recorded</p>'
    return (
        '<section id="words"><h2>The task</h2>' + task
        + "<h2>The agent's summary</h2>" + said + "</section>"
    )


def _digest(digest: Any, source: Any) -> str | None:
    if digest is None and source is None:
        return None
    return f"{digest or '?'} ({source or 'source not recorded'})"


def _verification(
    page: AttemptPage, check: Verification, log_name: str, auth: Authenticity
) -> str:
    notes: list[str] = []
    if check.problem is None:
        verdict = (
            f"intact: {check.records} line(s), {check.attempts} attempt(s), "
            "every record's hash and link checked"
        )
        css = "good"
    else:
        verdict = f"TAMPERED: {check.problem.what}"
        css = "bad"
    if page.attempt in check.unfinished or page.end is None:
        notes.append(f"this attempt: {UNFINISHED}")
    for n in check.incomplete:
        notes.append(f"line {n}: {INCOMPLETE}")
    items = "".join(f"<li>{escape(n)}</li>" for n in notes)
    return (
        '<section id="verify"><h2>The hash chain</h2>'
        f'<p class="{css}" id="verify-result">{escape(log_name)}: {escape(verdict)}</p>'
        + (f"<ul>{items}</ul>" if items else "")
        + _anchoring(check, auth)
        + "</section>"
    )


def _anchoring(check: Verification, auth: Authenticity) -> str:
    """What the log was checked against besides itself, and which: the page must
    not let "intact" pass for "authentic"."""
    if check.problem is not None:
        return ""
    if not auth.checked:  # the usual: nothing was given to check it against
        return (
            '<p class="none" id="anchor-result">not checked against an anchor: intact '
            "means the file agrees with itself. To show nobody rewrote it, check it against "
            "the head the run reported (<code>--head</code>) or a key "
            "(<code>--public-key</code>)</p>"
        )
    against = {"head": "the head given", "signature": "the public key given"}
    what = " and ".join(against[c] for c in auth.checked)
    if auth.problems:
        verdict, css, items = f"NOT AUTHENTIC (checked against {what})", "bad", auth.problems
    elif auth.unsigned:
        verdict, css, items = f"NOT SIGNED (checked against {what})", "bad", auth.unsigned
    else:
        verdict, css, items = f"{auth.label()}: checked against {what}", "good", auth.held
    listed = "".join(f"<li>{escape(x)}</li>" for x in [*items, *auth.notes])
    return f'<p class="{css}" id="anchor-result">{escape(verdict)}</p>' + (
        f'<ul id="anchor-details">{listed}</ul>' if listed else ""
    )


def _tally(counted: Tally, recorded: Any) -> str:
    """The tally as bars: one row a count, the label, the bar and the number in
    columns of their own, so a narrow window shortens the bar and never hides
    the number. Each bar is an SVG whose rect's width is a share of 100 (a
    presentation attribute: the policy allows no style attribute)."""
    values: dict[str, int] = asdict(counted)  # the counts in the order `Tally` names them
    top = max([1, *values.values()])
    bars = []
    for name, n in values.items():
        share = round(100 * n / top, 2)
        bars.append(
            f'<div class="t-row"><span class="t-label">{name}</span>'
            '<svg class="t-bar" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 10" '
            f'preserveAspectRatio="none" aria-hidden="true"><rect width="{share}" height="10" '
            f'class="bar {name}"></rect></svg>'
            f'<span class="t-count" id="tally-{name}">{n}</span></div>'
        )
    note = ""
    if isinstance(recorded, Mapping) and any(recorded.get(c) != n for c, n in values.items()):
        written = ", ".join(f"{recorded.get(c)} {c}" for c in values)
        note = (
            f'<p class="bad">the attempt-end record says {escape(written)}: not what its '
            "records count</p>"
        )
    return (
        '<section id="tally"><h2>Tally</h2>'
        f'<div class="tally" role="img" aria-label="tally">{"".join(bars)}</div>{note}</section>'
    )


def _cut_note(section: str, kept: int, total: int, what: str, command: str) -> str:
    """The page's word that a table holds only its first rows, and where the rest is."""
    if kept >= total:
        return ""
    return (
        f'<p class="bad cut" id="{section}-cut">this page holds the first {kept:,} of '
        f"{total:,} {what} (a page of them all would be too large to open): "
        f"<code>{escape(command)}</code> lists every one</p>"
    )


def _refusals(page: AttemptPage) -> str:
    """Every refusal, identical ones (what, by whom, rule, reason) as one row
    with their count: an agent that tried one thing 57 times is one row saying 57."""
    if not page.refused_total:
        return '<section id="refusals"><h2>Refused</h2><p>nothing was refused</p></section>'
    total, groups = page.refused_total, list(page.refusal_groups.values())
    grouped = sum(n for _, n in groups)
    cut = _cut_note("refusals", grouped, total, "refusals", "governor audit --refused LOG")
    lines = "".join(
        f'<tr class="refusal">{_seq_link(r.get("seq"))}'
        f'<td class="count">{"" if n == 1 else f"{n}×"}</td><td>{escape(r.get("of") or r.get("kind"))}</td>'
        f"<td>{_subject(r.get('subject'), r)}</td><td>{escape(r.get('by'))}</td>"
        f'<td class="rule">{escape(r.get("rule"))}</td><td class="reason">{escape(r.get("reason"))}</td></tr>'
        for r, n in groups
    )
    return (
        f'<section id="refusals"><h2>Refused ({total})</h2>{cut}<div class="scroll"><table>'
        "<thead><tr><th>#</th><th>times</th><th>kind</th><th>what</th><th>by</th><th>rule</th>"
        f"<th>reason</th></tr></thead><tbody>{lines}</tbody></table></div></section>"
    )


def _failures(page: AttemptPage) -> str:
    """What no rule refused but could not be done (a name that does not
    resolve, a host that does not answer, a request after the turn was over),
    identical ones as one row with their count, apart from the refusals: a
    machine without a route to the model API is not a policy that refused it."""
    if not page.failed_total:
        return ""
    total, groups = page.failed_total, list(page.failure_groups.values())
    lines = "".join(
        f'<tr class="failure">{_seq_link(r.get("seq"))}'
        f'<td class="count">{"" if n == 1 else f"{n}×"}</td><td>{escape(r.get("of") or r.get("kind"))}</td>'
        f"<td>{_subject(r.get('subject'), r)}</td><td>{escape(r.get('failed'))}</td>"
        f'<td class="reason">{escape(r.get("reason"))}</td></tr>'
        for r, n in groups
    )
    return (
        f'<section id="failures"><h2>Failed ({total})</h2><p>no rule refused these: they could '
        'not be done</p><div class="scroll"><table><thead><tr><th>#</th><th>times</th>'
        "<th>kind</th><th>what</th><th>what happened</th><th>reason</th></tr></thead>"
        f"<tbody>{lines}</tbody></table></div></section>"
    )


def _times(n: int) -> str:
    return "" if n == 1 else f"{n:,}\u00d7"


def _usage(end: Mapping[str, Any] | None) -> str:
    """Tokens, cost and tool calls as the attempt-end record keeps them (the
    run's summary's ``usage`` line), then the outcome's notices."""
    if end is None:
        return '<section id="usage"><h2>Usage</h2><p class="none">the attempt did not finish: no usage recorded</p></section>'
    usage = end.get("usage")
    if not isinstance(usage, Mapping):
        said = '<p class="none" id="usage-line">the log does not record usage (a plain program, or a governor before it did)</p>'
    else:
        parts = []
        if usage.get("reported") is False:
            parts.append("the agent reported no tokens or cost")
        tokens = usage.get("tokens")
        if isinstance(tokens, int):
            parts.append(f"{tokens:,} tokens")
        for name, words in (("inputTokens", "in"), ("outputTokens", "out")):
            n = usage.get(name)
            if isinstance(n, int):
                parts.append(f"{n:,} {words}")
        cost = usage.get("cost")
        if isinstance(cost, Mapping):
            parts.append(f"cost {cost.get('amount')} {cost.get('currency')}")
        calls = usage.get("tool_calls")
        if isinstance(calls, int):
            parts.append(f"{calls:,} tool call(s)")
        said = f'<p id="usage-line">{escape(", ".join(parts) or "nothing reported")}</p>'
    notices = end.get("notices")
    listed = [n for n in notices if isinstance(n, str)] if isinstance(notices, list) else []
    notes = (
        '<h2>Notices</h2><ul id="notices">' + "".join(f"<li>{escape(n)}</li>" for n in listed) + "</ul>"
        if listed
        else ""
    )
    return f'<section id="usage"><h2>Usage</h2>{said}{notes}</section>'


def _changes(page: AttemptPage, stats: DiffStat, diffs: Mapping[str, str]) -> str:
    """The changes something explains: what a governed write changed (its diff)
    and what the agent changed itself under a permission it was allowed. One
    block each, not a table's row, so that a diff reads in full at a phone's width."""
    total, found = page.changes_total, page.changes
    if not found:
        return ""
    cut = _cut_note(
        "changes", len(found), total, "changes", f"governor audit --attempt {page.attempt} LOG"
    )
    items = []
    for r in found:
        subject = r.get("subject")
        if r.get("kind") == "diff":
            at = r.get("decision")
            how = "written"
            why = "explained by a governed write" + (
                f', allowed at <a href="#r{at}">#{at}</a>' if type(at) is int else ""
            )
            body = _diff(r.get("diff"))
        else:
            how = change(subject, None, stats)
            why = _explained(r)
            body = _patched(r, diffs, folded=False)
        seq = r.get("seq")  # a diff record is no decision: no timeline row to link to
        head = escape(f"#{seq}") if r.get("kind") == "diff" else _seq_anchor(seq)
        items.append(
            f'<div class="item {_css(str(r.get("kind"))[:40])}">'
            f'<p class="item-head">{head} <code class="what">{escape(shown(r))}</code> '
            f'<span class="change">{escape(how)}</span></p>'
            f'<div class="explained">{why}</div>{body}</div>'
        )
    return f'<section id="changes"><h2>Changes ({total})</h2>{cut}{"".join(items)}</section>'


def _seq_anchor(seq: Any) -> str:
    return f'<a href="#r{seq}">#{seq}</a>' if type(seq) is int else escape(seq)


def _diff(diff: Any) -> str:
    """A unified diff as text, each line in a span classed by its first character
    (added, removed, context): escaped like every value, bounded when written."""
    if not isinstance(diff, str):
        return '<span class="none">no diff recorded</span>'
    lines = []
    for line in diff[:DIFF_CHARS].splitlines():
        css = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx")
        if line.startswith(("+++", "---")):
            css = "file"
        lines.append(f'<span class="{css}">{escape(line)}</span>')
    return '<pre class="diff">' + "".join(lines) + "</pre>"


DIFF_CHARS: Final = 20_000
"""What the page shows of one diff (the record holds a bounded one already)."""


def _commands(page: AttemptPage) -> str:
    """Each command the agent ran through the governor: how it ended and the
    newest lines of its output (masked and bounded when recorded), one block
    each (see `_changes`)."""
    total, found = page.commands_total, page.commands
    if not found:
        return ""
    cut = _cut_note(
        "commands", len(found), total, "commands", f"governor audit --attempt {page.attempt} LOG"
    )
    items = []
    for r in found:
        code, signal = r.get("exit_code"), r.get("signal")
        if signal is not None:
            ended = f"killed by {signal}"
        elif code is None:
            ended = "no exit status"
        else:
            ended = f"exit {code}"
        css = "good" if code == 0 and signal is None else "bad"
        tail = r.get("tail")
        out = (
            f'<pre class="tail">{escape(tail, DIFF_CHARS)}</pre>'
            if isinstance(tail, str) and tail
            else '<p class="none">no output</p>'
        )
        items.append(
            f'<div class="item command"><p class="item-head">{_seq_anchor(r.get("decision"))} '
            f'<code class="what">{escape(shown(r))}</code> <span class="exit {css}">{escape(ended)}</span></p>'
            f"{out}</div>"
        )
    return f'<section id="commands"><h2>Commands ({total})</h2>{cut}{"".join(items)}</section>'


def _patched(record: Mapping[str, Any], diffs: Mapping[str, str], *, folded: bool) -> str:
    """The lines a change changed: its record's own diff (a file the agent changed
    itself, from the attempt's start), else those of a batch job's patch in the
    change's files (``folded``: under a ``diff`` toggle, for a table's cell)."""
    subject = record.get("subject")
    if isinstance(record.get("diff"), str):
        shown = _diff(record["diff"])
    elif not isinstance(subject, Mapping) or not diffs:
        return ""
    else:
        listed = subject.get("paths")
        paths = [subject.get("path"), *(listed if isinstance(listed, list) else [])]
        found = [diffs[p] for p in paths[:CHANGE_PATHS] if isinstance(p, str) and p in diffs]
        shown = "".join(_diff(d) for d in found)
    if not shown or not folded:
        return shown
    return f"<details><summary>diff</summary>{shown}</details>"


def _unasked(page: AttemptPage, stats: DiffStat, diffs: Mapping[str, str]) -> str:
    total, found = page.unasked_total, page.unasked
    cut = _cut_note(
        "unasked", len(found), total, "changes", f"governor audit --attempt {page.attempt} LOG"
    )
    if not found:
        return (
            '<section id="unasked"><h2>Changes without asking</h2>'
            "<p>every change is accounted for by a governed action</p></section>"
        )
    changed = _files_changed(page.end)
    lines = "".join(
        f'<tr class="{escape(r.get("kind"))}">{_seq_link(r.get("seq"))}<td>{escape(r.get("kind"))}</td>'
        f"<td>{_subject(r.get('subject'), r)}</td>"
        f'<td class="change">{escape(change(r.get("subject"), changed, stats))}'
        f"{_patched(r, diffs, folded=True)}</td>"
        f"<td>{escape(r.get('by'))}</td>"
        f'<td class="explained">{_explained(r)}</td></tr>'
        for r in found
    )
    return (
        f'<section id="unasked"><h2>Changes without asking ({total})</h2>{cut}'
        '<div class="scroll"><table>'
        "<thead><tr><th>#</th><th>kind</th><th>what</th><th>change</th><th>found by</th>"
        f"<th>what explains it</th></tr></thead><tbody>{lines}</tbody></table></div></section>"
    )


CHANGE_PATHS: Final = 5
"""Paths of one record the change column describes; it says how many more."""


def _files_changed(end: Mapping[str, Any] | None) -> frozenset[str] | None:
    """The files the workspace's diff found changed (the attempt-end record's),
    or None when the log does not say (no end record)."""
    if end is None:
        return None
    files = end.get("files_changed")
    return frozenset(f for f in files if isinstance(f, str)) if isinstance(files, list) else frozenset()


def change(subject: Any, changed: frozenset[str] | None, stats: DiffStat) -> str:
    """What a change without asking did to the workspace: how each file changed
    (the workspace diff's ``created``/``changed``/``deleted``, or, for a tool
    call the agent reported, whether the diff found its files changed) and the
    lines added and removed when the workspace's patch is known."""
    if not isinstance(subject, Mapping):
        return ""
    how, path = subject.get("change"), subject.get("path")
    if isinstance(how, str) and isinstance(path, str):
        return how + _stat(stats.get(path))
    listed = subject.get("paths")  # a crafted log's may be anything
    paths = [p for p in listed if isinstance(p, str)] if isinstance(listed, list) else []
    tool = subject.get("tool_kind")
    lead = f"{tool}: " if isinstance(tool, str) else ""
    if not paths:
        return lead + "no file named" if lead else ""
    parts = []
    for p in paths[:CHANGE_PATHS]:
        name = p.rsplit("/", 1)[-1] or p
        if changed is None:
            seen = ""
        elif p in changed:
            seen = " changed"
        else:
            seen = " not changed in the workspace"
        parts.append(f"{name}{seen}{_stat(stats.get(p))}")
    more = f" and {len(paths) - CHANGE_PATHS} more" if len(paths) > CHANGE_PATHS else ""
    return lead + "; ".join(parts) + more


def _stat(lines: tuple[int, int] | None) -> str:
    return "" if lines is None else f" (+{lines[0]} \u2212{lines[1]})"


def _explained(record: Mapping[str, Any]) -> str:
    cause = record.get("explained_by")
    reason = f'<div class="reason">{escape(record.get("reason"))}</div>'
    if not isinstance(cause, Mapping):
        return f'<strong class="bad">nothing explains it</strong>{reason}'
    rule = str(cause.get("rule"))
    parts = [f"rule <code>{escape(rule)}</code>"]
    if cause.get("tool_call") is not None:
        parts.append(f"tool call <code>{escape(cause.get('tool_call'))}</code>")
    seq = cause.get("seq")
    if isinstance(seq, int):
        parts.append(f'allowed at <a href="#r{seq}">#{seq}</a>')
    meaning = EXPLANATIONS.get(rule)
    why = f"<div>{escape(meaning)}</div>" if meaning else ""
    return f"explained by {', '.join(parts)}{why}{reason}"


def _timeline(page: AttemptPage) -> str:
    total, rows, t0 = page.decisions, page.timeline, page.started
    verdicts = _filtered(Counter(_value(verdict_of(r)) for r in rows))
    kinds = _filtered(Counter(_value(r.get("kind")) for r in rows))
    body = "".join(_timeline_row(r, t0, verdicts, kinds) for r in rows)
    cut = _cut_note(
        "timeline", len(rows), total, "decisions", f"governor audit --attempt {page.attempt} LOG"
    )
    return (
        '<section id="timeline-section"><h2>Timeline: requests and decisions</h2>'
        '<form id="filters" action="#">'
        + _boxes("verdict", verdicts)
        + _boxes("kind", kinds)
        + '<a href="#all=">show all</a></form>'
        "<noscript><p>The filters need JavaScript; every decision is shown.</p></noscript>"
        + cut
        + f'<p id="shown" data-shown="{len(rows)}" data-total="{len(rows)}">'
        f"{len(rows)} of {len(rows)} decisions shown</p>"
        '<div class="scroll"><table id="timeline"><thead><tr><th>#</th><th>time</th><th>kind</th>'
        "<th>request</th><th>what</th><th>verdict</th><th>by</th><th>rule</th>"
        f"<th>reason</th><th>option</th></tr></thead><tbody>{body}</tbody></table></div></section>"
    )


def _filtered(counts: Counter[str]) -> Counter[str]:
    """The values a filter has a box for: the `FILTER_VALUES` commonest, the rest
    counted as `OTHER`."""
    if len(counts) <= FILTER_VALUES:
        return counts
    kept = Counter(dict(counts.most_common(FILTER_VALUES - 1)))
    kept[OTHER] = sum(counts.values()) - sum(kept.values())
    return kept


def _boxes(group: str, counts: Counter[str]) -> str:
    boxes = "".join(
        f'<label><input type="checkbox" name="{group}" value="{escape(value)}" checked> '
        f"{escape(value)} ({n})</label>"
        for value, n in sorted(counts.items())
    )
    return f"<fieldset><legend>{group}</legend>{boxes}</fieldset>"


def _timeline_row(
    r: Mapping[str, Any], t0: float | None, verdicts: Counter[str], kinds: Counter[str]
) -> str:
    at = r.get("time")
    clock = f"+{at - t0:.3f}s" if isinstance(at, int | float) and t0 is not None else ""
    verdict, kind = _value(verdict_of(r)), _value(r.get("kind"))  # the tally's word
    verdict = verdict if verdict in verdicts else OTHER
    kind = kind if kind in kinds else OTHER
    seq = r.get("seq")
    anchor = f' id="r{seq}"' if isinstance(seq, int) else ""
    return (
        f'<tr{anchor} data-verdict="{escape(verdict)}" data-kind="{escape(kind)}" '
        f'class="v-{_css(verdict[:40])}"><td>{escape(seq)}</td><td>{escape(clock)}</td>'
        f"<td>{escape(kind)}</td><td>{escape(r.get('request'))}</td>"
        f"<td>{_subject(r.get('subject'), r)}</td><td>{escape(verdict)}</td>"
        f"<td>{escape(r.get('by'))}</td><td>{escape(r.get('rule'))}</td>"
        f'<td class="reason">{escape(r.get("reason"))}</td><td>{escape(r.get("option"))}</td></tr>'
    )


def _subject(subject: Any, record: Mapping[str, Any]) -> str:
    """What a record is about: its command, path or title, the title apart when the
    command is shown, and every field of the subject folded away."""
    main = shown(record)
    if not main and subject is not None:
        main = json_text(subject)
    title = _field(subject, "title")
    parts = [f'<span class="what">{escape(main)}</span>']
    if title and title != main:
        parts.append(f'<div class="title">{escape(title)}</div>')
    if isinstance(subject, Mapping) and subject:
        parts.append(
            "<details><summary>fields</summary>"
            f"<pre>{escape(json_text(subject, indent=1), FIELDS_CHARS)}</pre></details>"
        )
    return "".join(parts)


def _seq_link(seq: Any) -> str:
    if isinstance(seq, int):
        return f'<td><a href="#r{seq}">#{seq}</a></td>'
    return f"<td>{escape(seq)}</td>"


# -- values ----------------------------------------------------------------------------


def _field(subject: Any, key: str) -> str | None:
    value = subject.get(key) if isinstance(subject, Mapping) else None
    return value if isinstance(value, str) and value else None


def _value(value: Any) -> str:
    """A verdict or kind as the filter's value: ``-`` when the record has none."""
    if value is None:
        return "-"
    return value if isinstance(value, str) else json_text(value)


def _css(value: str) -> str:
    """A class name from a verdict: letters, digits and ``-`` only."""
    return "".join(c if c.isascii() and (c.isalnum() or c == "-") else "_" for c in value)
