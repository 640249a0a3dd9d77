"""A batch's output as one HTML page: a row per job (its status and the checks'
verdict as badges, its tally, its changes without asking and refusals) linking
to each job's own attempt page, written beside it; and the lines a job's patch
adds and removes per file, for the change column of its page.

Rules of this file: the page is built like the attempt's (`governor.audit.report`:
everything from the outcomes and the logs escaped, one style allowed by hash
and no script at all); a link is to a page this command wrote, named from the
job's id, which `governor.audit.record_shape.JOB_ID` has already checked holds no
``/`` and is no ``..``; the rows keep counts, never records, so a batch of
long attempts is summed up in the memory of one of its pages.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from governor.audit.effects import DIFF_CHARS, DIFF_LINES
from governor.audit.html_page import badges, document
from governor.audit.html_page import escape as escaped
from governor.audit.page_source import AttemptPage
from governor.audit.tally import Tally

REFUSED_BEFORE_START: Final = "refused before start"
"""How a job's reason begins when the governor refused its attempt before it began
(`governor.batch.work`): its badge reads ``refused``."""


@dataclass(frozen=True, slots=True)
class JobEntry:
    """One finished job as its row shows it."""

    job: str
    line: Mapping[str, Any]
    """Its outcome line (``outcomes.jsonl``)."""
    tally: Tally
    unasked: int
    refused: int
    decisions: int
    intact: bool | None
    """Whether its log verifies (None: no log to check)."""
    href: str | None
    """Its attempt page, relative to the batch page (None: no attempt in its log)."""
    anchored: bool = False
    """Whether its log was checked against a head or a key besides itself."""

    @property
    def status(self) -> str:
        """Its outcome's status; ``refused`` for an attempt refused before start."""
        status = str(self.line.get("status"))
        reason = self.line.get("reason")
        if status == "failed" and isinstance(reason, str) and reason.startswith(REFUSED_BEFORE_START):
            return "refused"
        return status


def entry(
    job: str,
    line: Mapping[str, Any],
    page: AttemptPage | None,
    intact: bool | None,
    href: str | None,
    *,
    anchored: bool = False,
) -> JobEntry:
    """A job's row: the counts from its log when it holds the attempt (as the
    outcome computed them), else from its outcome line."""
    if page is not None:
        return JobEntry(
            job, line, page.tally, page.unasked_total, page.refused_total, page.decisions,
            intact, href, anchored,
        )  # fmt: skip
    counts = (line.get("acp") or {}).get("tally") or {}
    tally = Tally(**{c: int(counts.get(c, 0)) for c in asdict(Tally())})
    return JobEntry(job, line, tally, tally.unasked, tally.refused, 0, intact, href)


def page_name(stem: str, job: str) -> str:
    """The file name of a job's page beside the batch page ``stem``.html."""
    return f"{stem}.{job}.html"


def render_batch(entries: Sequence[JobEntry], *, folder: str) -> str:
    """The batch page: its jobs by status, the total tally, then a row a job."""
    by_status: dict[str, int] = {}
    for e in entries:
        by_status[e.status] = by_status.get(e.status, 0) + 1
    names = list(asdict(Tally()))
    total = {c: sum(getattr(e.tally, c) for e in entries) for c in names}
    statuses = " ".join(
        f"{badges(s, None, ids=False)} {n}" for s, n in sorted(by_status.items())
    )
    head = (
        f"<h1>Batch <code>{escaped(folder)}</code></h1>"
        f'<section id="summary"><p id="jobs">{len(entries)} job(s): {statuses or "none finished"}</p>'
        f'<p id="total">{escaped(", ".join(f"{total[c]} {c}" for c in names))}</p></section>'
    )
    rows = "".join(_row(e, names) for e in entries)
    table = (
        '<section id="jobs-section"><h2>Jobs</h2><div class="scroll"><table id="batch">'
        "<thead><tr><th>job</th><th>status</th><th>verdict</th>"
        + "".join(f'<th class="n">{c}</th>' for c in names)
        + "<th>reason</th><th>log</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></div></section>"
    )
    empty = "" if entries else "<p>no job of this batch has finished</p>"
    return document(f"governor audit report: {folder}", head + table + empty, script=False)


def _row(e: JobEntry, names: list[str]) -> str:
    verdict = e.line.get("verdict")
    link = (
        f'<a href="{escaped(quote(e.href))}">{escaped(e.job)}</a>' if e.href else escaped(e.job)
    )
    counts = "".join(
        f'<td class="n {c}">{getattr(e.tally, c)}</td>' for c in names
    )
    log = (
        "no attempt"
        if e.intact is None
        else ("intact" + (", anchored" if e.anchored else " (not anchored)"))
        if e.intact
        else '<strong class="bad">TAMPERED</strong>'
    )
    return (
        f'<tr data-job="{escaped(e.job)}"><td class="job">{link}</td>'
        f"<td>{badges(e.status, None, ids=False)}</td>"
        f"<td>{badges(verdict, None, ids=False) if isinstance(verdict, str) else '-'}</td>{counts}"
        f'<td class="reason">{escaped(e.line.get("reason"))}</td><td>{log}</td></tr>'
    )


@dataclass(frozen=True, slots=True)
class _Header:
    """A file's headers in a patch: its path under the workspace, and its old
    and new names as the patch gives them (None for /dev/null)."""

    path: str
    old: str | None
    new: str | None


def _patch_walk(patch: Path, workspace: str) -> Iterator[tuple[_Header, bytes | None]]:
    """A job's ``changes.patch`` (a ``git diff`` of its workspace) read one line
    at a time: each file's `_Header` with None at its ``+++`` line, then with each
    line of its hunks. Raises OSError as reading does."""
    prefix = workspace.rstrip("/") + "/"
    header: _Header | None = None
    old: str | None = None
    with patch.open("rb") as f:
        for raw in f:
            if raw.startswith(b"diff --git "):
                header, old = None, None
            elif header is None and raw.startswith(b"--- "):
                old = _patch_path(raw[4:])
            elif header is None and raw.startswith(b"+++ "):
                new = _patch_path(raw[4:])
                named = new or old
                header = _Header(prefix + named if named else "", old, new)
                yield header, None
            elif header is not None:
                yield header, raw


def diff_stat(patch: Path, workspace: str | None, wanted: Collection[str]) -> dict[str, tuple[int, int]]:
    """The lines a job's ``changes.patch`` adds and removes in each file of
    ``wanted`` (absolute paths under ``workspace``); {} without a workspace or a
    patch."""
    if workspace is None or not wanted:
        return {}
    out: dict[str, list[int]] = {}
    try:
        for header, raw in _patch_walk(patch, workspace):
            if header.path not in wanted:
                continue
            counts = out.setdefault(header.path, [0, 0])
            if raw is not None and raw[:1] in (b"+", b"-"):
                counts[raw[:1] == b"-"] += 1
    except OSError:
        return {}
    return {p: (a, d) for p, (a, d) in out.items()}


LINE_BYTES: Final = 64 * 1024
"""What of one line of a patch is read for a page (a minified file's line may
be megabytes); the text is masked after, then cut to what the page shows."""


def patch_texts(
    patch: Path, workspace: str | None, wanted: Collection[str], mask: Callable[[str], str]
) -> dict[str, str]:
    """Each file of ``wanted``'s part of a job's ``changes.patch`` (its hunks),
    for its change on the job's page: read one line at a time, cut at
    `governor.audit.effects.DIFF_LINES` lines (saying how many more), then masked
    (``mask``: the patch is the workspace's, written unmasked); {} without a
    workspace or a patch."""
    if workspace is None or not wanted:
        return {}
    kept: dict[str, list[str]] = {}
    more: dict[str, int] = {}
    try:
        for header, raw in _patch_walk(patch, workspace):
            if header.path not in wanted:
                continue
            lines = kept.setdefault(header.path, [])
            if raw is None:
                lines.append(f"--- {'/dev/null' if header.old is None else 'a/' + header.old}")
                lines.append(f"+++ {'/dev/null' if header.new is None else 'b/' + header.new}")
            elif len(lines) < DIFF_LINES:
                lines.append(raw[:LINE_BYTES].decode("utf-8", errors="replace").rstrip("\n"))
            else:
                more[header.path] = more.get(header.path, 0) + 1
    except OSError:
        return {}
    out = {}
    for p, text in kept.items():
        said = f"\n... ({more[p]:,} more line(s) of the patch not shown)" if p in more else ""
        out[p] = mask("\n".join(text))[:DIFF_CHARS] + said
    return out


def _patch_path(raw: bytes) -> str | None:
    """A patch header's path without its ``a/`` or ``b/``; None for /dev/null."""
    text = raw.rstrip(b"\n").decode("utf-8", errors="replace").split("\t", 1)[0]
    if text == "/dev/null":
        return None
    return text[2:] if text[:2] in ("a/", "b/") else text
