"""What the attempt page says, from logs written by the governor's own writer
(`AuditLog`): the status badge and the checks' verdict, the prompt and the
agent's summary (escaped, and a log from before either was recorded still
renders), the change column, and the bound on a long attempt's tables (the
tally still counts every record). Run through `governor audit report`'s own
entry point."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from governor import cli
from governor.audit.log import AuditLog
from governor.audit.page_source import PAGE_ROWS

PLANT = "<script>alert(1)</script>"


def _log(path: Path, *, start: dict[str, Any], decisions: list[dict[str, Any]],
         end: dict[str, Any] | None) -> Path:  # fmt: skip
    log = AuditLog(path, "a1")
    log.record("attempt-start", agent="demo", workspace="/ws", **start)
    for d in decisions:
        log.record(d.pop("kind"), **d)
    if end is not None:
        log.record("attempt-end", **end)
    log.close()
    return path


def _page(capsys: pytest.CaptureFixture[str], log: Path) -> str:
    out = log.with_suffix(".html")
    code = cli.main(["audit", "report", str(log), "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    return out.read_text()


def _text(html: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</', html, re.S)
    assert found, element_id
    return found.group(1)


UNASKED = {
    "kind": "unasked",
    "subject": {"tool_call": "n", "title": "Write NOTES.md", "tool_kind": "edit",
                "paths": ["/ws/NOTES.md", "/ws/gone.md"]},
    "verdict": "reported", "by": "agent", "reason": "never came through the governor",
}  # fmt: skip
DIFFED = {
    "kind": "unasked", "subject": {"path": "/ws/late.txt", "change": "created"},
    "verdict": "reported", "by": "sandbox", "reason": "nothing explains it",
}  # fmt: skip


def test_the_badge_says_the_status_and_the_checks_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(tmp_path / "v.jsonl", start={"prompt": "fix it"}, decisions=[],
               end={"status": "completed", "verdict": "failed", "summary": "fixed"})  # fmt: skip
    html = _page(capsys, log)
    assert '<span class="badge good" id="status">completed</span>' in html
    assert '<span class="badge bad" id="verdict">checks failed</span>' in html
    cut = _log(tmp_path / "u.jsonl", start={}, decisions=[], end=None)
    html = _page(capsys, cut)
    assert '<span class="badge warn" id="status">unfinished</span>' in html
    assert 'id="verdict"' not in html


def test_a_crafted_status_gets_no_colour_of_its_own_and_is_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(tmp_path / "s.jsonl", start={}, decisions=[],
               end={"status": f"good {PLANT}", "verdict": PLANT})  # fmt: skip
    html = _page(capsys, log)
    assert PLANT not in html
    assert '<span class="badge other" id="status">good &lt;script&gt;' in html


def test_the_prompt_and_the_summary_are_shown_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(tmp_path / "p.jsonl", start={"prompt": f"make {PLANT} hello"}, decisions=[],
               end={"status": "completed", "summary": f"Done {PLANT}"})  # fmt: skip
    html = _page(capsys, log)
    assert PLANT not in html
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert _text(html, "prompt") == f"make {escaped} hello"
    assert _text(html, "summary") == f"Done {escaped}"


def test_a_log_from_before_the_prompt_was_recorded_still_renders_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(tmp_path / "old.jsonl", start={}, decisions=[], end={"status": "completed"})
    html = _page(capsys, log)
    assert "does not record the prompt" in _text(html, "prompt")
    assert _text(html, "summary") == "no summary recorded"
    blocked = _log(tmp_path / "b.jsonl", start={}, decisions=[],
                   end={"status": "blocked", "reason": "the spec contradicts itself"})  # fmt: skip
    assert _text(_page(capsys, blocked), "summary") == "the spec contradicts itself"


def test_the_change_column_says_how_each_file_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(tmp_path / "c.jsonl", start={}, decisions=[dict(UNASKED), dict(DIFFED)],
               end={"status": "completed", "files_changed": ["/ws/NOTES.md", "/ws/late.txt"]})  # fmt: skip
    changes = re.findall(r'<td class="change">(.*?)</td>', _page(capsys, log))
    assert changes == ["edit: NOTES.md changed; gone.md not changed in the workspace", "created"]
    unfinished = _log(tmp_path / "cu.jsonl", start={}, decisions=[dict(UNASKED)], end=None)
    assert re.findall(r'<td class="change">(.*?)</td>', _page(capsys, unfinished)) == [
        "edit: NOTES.md; gone.md"  # no end record: the diff is not known
    ]


def test_a_long_attempt_keeps_the_first_rows_and_its_tally_counts_every_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = PAGE_ROWS + 500
    reads = [
        {"kind": "read", "request": i, "subject": {"path": f"/ws/f{i}"}, "verdict": "allow",
         "by": "policy", "reason": "read"}
        for i in range(n)
    ]  # fmt: skip
    log = _log(tmp_path / "long.jsonl", start={}, decisions=reads, end={"status": "completed"})
    html = _page(capsys, log)
    assert f"this page holds the first {PAGE_ROWS:,} of {n:,} decisions" in html
    assert html.count("<tr id=") == PAGE_ROWS
    assert _text(html, "tally-asked") == str(n) and _text(html, "tally-allowed") == str(n)
