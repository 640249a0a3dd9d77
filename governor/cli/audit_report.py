"""`governor audit report`: one attempt as an HTML page, or a batch's output as
a page of its jobs with each job's attempt page beside it.

    governor audit report LOG|DIR [--attempt ID] [--head HASH] [--public-key FILE] -o FILE.html
    governor audit report OUT -o FILE.html      (OUT: a `governor batch --out` folder)

Every log is read once, streaming (`governor.audit.page_source`): memory is
bounded by a page's rows, not by the log's size.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from governor.audit.anchor import Anchor, authenticate
from governor.audit.page_source import AttemptPage, Chooser, fold_log
from governor.audit.reading import (
    BATCH_LOG,
    BATCH_OUTCOMES,
    LogMalformed,
    is_batch_output,
    log_files,
)
from governor.audit.record_shape import outcome_malformed
from governor.audit.signing import PublicKey
from governor.audit.verify import INCOMPLETE, Verification
from governor.cli.audit_common import HEAD, UsageError, job_lines


def run_html_report(
    paths: Sequence[str],
    output: str,
    *,
    attempt: str | None = None,
    heads: Sequence[str] | None = None,
    public_key: str | None = None,
) -> int:
    """Write one attempt's page (`governor.audit.report`) to ``output``, saying what
    its log was checked against (``heads``, ``public_key``); for a batch's output
    folder, the batch page and its jobs' pages (`run_batch_report`). Exit 1 for
    an id that names no attempt (or several), 2 for several attempts and no id;
    both name the choices."""
    key = PublicKey.load(public_key) if public_key else None
    bad = [h for h in heads or () if not HEAD.fullmatch(h)]
    if bad:
        raise UsageError(f"--head {bad[0]!r} is not a head: 64 lowercase hex digits")
    if len(paths) == 1 and is_batch_output(Path(paths[0])) and attempt is None:
        if heads:
            raise UsageError("a batch's heads are in its outcomes.jsonl: give no --head")
        return run_batch_report(Path(paths[0]), output, key=key)
    from governor.audit.report import render

    files = log_files(paths)
    if heads and len(files) != 1:
        raise UsageError("--head anchors one log: name one file")
    chooser = Chooser(attempt)
    checks = [fold_log(p, chooser, n, set(heads or ())) for n, p in enumerate(files)]
    if not chooser.ids:
        raise UsageError(f"no attempts in {', '.join(paths)}")
    try:
        page, n = chooser.chosen()
    except ValueError as e:
        raise UsageError(
            f"{e}: choose one with --attempt ID ({chooser.choices()})"
        ) from None
    except LookupError as e:
        print(f"governor audit: {e}; the attempts: {chooser.choices()}", file=sys.stderr)
        return 1
    log, check = files[n], checks[n]
    _warn(log, check)
    masked = _masker()
    auth = authenticate(check, anchors=[Anchor(h) for h in heads] if heads else None, key=key)
    for problem in auth.problems:
        print(f"warning: {log}: {problem}", file=sys.stderr)
    stats, diffs = _job_stats(log, page, masked)
    html = render(
        page, check, log_name=masked(str(log)), authenticity=auth, stats=stats, diffs=diffs
    )
    if output == "-":
        sys.stdout.write(html)
        return 0
    _write(Path(output), html)
    print(f"wrote {output}: attempt {page.attempt}, {page.records} record(s)")
    return 0


def run_batch_report(root: Path, output: str, *, key: PublicKey | None = None) -> int:
    """Write the page of a batch's output (a row a finished job, `governor.audit.
    batch_page`) to ``output`` and each job's attempt page beside it, as
    ``STEM.JOB.html``; each job's log is checked against the head on its outcome
    line. A job id that is not one (`governor.audit.record_shape.JOB_ID`: it would name
    a folder outside the output) is refused naming its line, before any page."""
    from governor.audit.batch_page import (
        diff_stat,
        entry,
        page_name,
        patch_texts,
        render_batch,
    )
    from governor.audit.report import render
    from governor.batch.output import PATCH, read_outcomes

    if output == "-":
        raise UsageError(
            "a batch's report is a page per job and one of the batch: give -o FILE.html "
            "(the jobs' pages are written beside it)"
        )
    out = Path(output)
    where = job_lines(root, (BATCH_LOG, PATCH))  # every job's name checked, and its line
    lines = read_outcomes(root)
    for job, line in lines.items():
        wrong = outcome_malformed(line)
        if wrong is not None:
            raise LogMalformed(root / BATCH_OUTCOMES, where.get(job, 0), f"job {job}: {wrong}")
    masked = _masker()
    entries = []
    for job, line in lines.items():
        log = root / job / BATCH_LOG
        head = line.get("log_head")
        anchors = (
            [Anchor(head, source=BATCH_OUTCOMES)]
            if isinstance(head, str) and HEAD.fullmatch(head)
            else None
        )
        chooser = Chooser(None, last=True)
        check = fold_log(log, chooser, wanted={a.head for a in anchors or ()})
        _warn(log, check)
        page = chooser.first
        if page is None:
            entries.append(entry(job, line, None, None, None))
            continue
        auth = authenticate(check, anchors=anchors, key=key)
        changed = _unasked_paths(page)
        stats = diff_stat(root / job / PATCH, _workspace(page), changed)
        diffs = patch_texts(root / job / PATCH, _workspace(page), changed, masked)
        name = page_name(out.stem, job)
        html = render(
            page, check, log_name=masked(str(log)), authenticity=auth, stats=stats, diffs=diffs
        )
        _write(out.parent / name, html)
        intact = check.problem is None and not auth.problems
        entries.append(entry(job, line, page, intact, name, anchored=bool(auth.checked)))
    _write(out, render_batch(entries, folder=masked(str(root))))
    pages = sum(1 for e in entries if e.href)
    print(f"wrote {output}: {len(entries)} job(s), and {pages} attempt page(s) beside it")
    return 0


def _job_stats(
    log: Path, page: AttemptPage, mask: Callable[[str], str]
) -> tuple[dict[str, tuple[int, int]], dict[str, str]]:
    """A batch job's diff stat and each changed file's part of its patch when
    the log is one (``OUT/JOB/audit.jsonl``, its patch beside it), else none."""
    from governor.audit.batch_page import diff_stat, patch_texts
    from governor.batch.output import PATCH

    if log.name != BATCH_LOG or not is_batch_output(log.parent.parent):
        return {}, {}
    changed, workspace = _unasked_paths(page), _workspace(page)
    return (
        diff_stat(log.parent / PATCH, workspace, changed),
        patch_texts(log.parent / PATCH, workspace, changed, mask),
    )


def _workspace(page: AttemptPage) -> str | None:
    workspace = (page.start or {}).get("workspace")
    return workspace if isinstance(workspace, str) else None


def _unasked_paths(page: AttemptPage) -> set[str]:
    """The paths the change column of a page describes (its changes without
    asking and its explained ones)."""
    found: set[str] = set()
    for r in [*page.unasked, *page.changes]:
        subject = r.get("subject")
        if not isinstance(subject, Mapping):
            continue  # a crafted record's: its path is no path of ours to describe
        listed = subject.get("paths")
        for p in [subject.get("path"), *(listed if isinstance(listed, list) else [])]:
            if isinstance(p, str):
                found.add(p)
    return found


def _warn(log: Path, check: Verification) -> None:
    if check.problem is not None:
        print(
            f"warning: {log} does not verify: {check.problem.what} (see `governor audit verify`)",
            file=sys.stderr,
        )
    for n in check.incomplete:
        print(f"warning: {log}: line {n}: {INCOMPLETE}", file=sys.stderr)


def _masker() -> Callable[[str], str]:
    """The records are masked as written; the log's name is what the page adds."""
    from governor.boundary.secrets import Masker

    return Masker.from_environ(os.environ).text


def _write(path: Path, text: str) -> None:
    from governor.boundary.person_files import write_output
    from governor.sandbox.host.processes import written_places

    try:  # never through a link an attempt may have left (-o audit.html in its workspace)
        write_output(path, text, written=written_places())
    except OSError as e:
        raise UsageError(f"{path}: cannot write the page: {e.strerror}") from None
