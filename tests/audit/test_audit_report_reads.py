"""What an auditor reads on the attempt page, read back from a real headless
Chromium's text of the page (not only found in the HTML): the tokens and cost,
the notices, each command's exit code and the newest lines of its output, each
governed write's diff, identical refusals as one row with their count, a change
the agent made under a permission it was allowed among the explained changes
and not under "changes without asking", and the anchor's state: said calmly
when nothing was given to check the log against, an alarm when a head was given
and the log does not end there. An agent's hostile text in a diff and in a
command's output stays text (no element is made of it, nothing runs), and a
secret in either is masked. At 400 and 1,400 px, with screenshots in
$ACP_GOVERNOR_ARTIFACTS.

The attempt is real: the scripted agent over real pipes, the governor's gate,
its commands in bubblewrap; the page is written by the `governor` console
script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from audit_helpers import scripted_spec
from browser import DevTools, artifacts, devtools, find_chromium, layout

from governor.attempt.lifecycle import run_attempt

GOVERNOR = Path(sys.executable).parent / "governor"
WIDTHS = (400, 1400)
TOKEN = "ghp_" + "Q7x" * 12  # a GitHub token's shape: the masker's
HOSTILE = '<img src=x onerror="document.title=1"><script>document.title="owned"</script>'
REFUSALS = 100
"""Identical refusals: more than the log writes one by one in a burst
(`governor.audit.repeated_refusals.BURST`), so the page also folds its count of the rest."""


def _governor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GOVERNOR), *args], capture_output=True, text=True, timeout=120, env=os.environ
    )


def _steps() -> list[Any]:
    allow = [
        {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
        {"optionId": "no", "name": "Reject", "kind": "reject_once"},
    ]
    return [
        {"write": "{cwd}/calc.py", "text": f"def add(a, b):\n    return a + b\n# {HOSTILE}\nkey = '{TOKEN}'\n"},
        {"update": {"sessionUpdate": "usage_update", "used": 48_213, "size": 200_000,
                    "cost": {"amount": 0.37, "currency": "USD"}}},
        {"request": "fs/write_text_file", "params": {
            "sessionId": "{session}", "path": "{cwd}/app.py",
            "content": f"keep = 1\nold = 2\n# {HOSTILE}\nkey = '{TOKEN}'\n"}},
        {"request": "fs/write_text_file", "params": {
            "sessionId": "{session}", "path": "{cwd}/app.py",
            "content": f"keep = 1\nnew = 3\n# {HOSTILE}\nkey = '{TOKEN}'\n"}},
        {"request": "terminal/create", "params": {
            "sessionId": "{session}", "command": "/bin/sh", "cwd": "{cwd}",
            "args": ["-c", f"echo first line; echo '{HOSTILE}'; echo 'token {TOKEN}'; "
                           "echo last words; exit 3"]}},
        {"sleep": 1.5},
        {"repeat": REFUSALS, "steps": [{"request": "fs/write_text_file", "params": {
            "sessionId": "{session}", "path": "{cwd}/.git/hooks/pre-commit",
            "content": "#!/bin/sh\n"}}]},
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "own", "title": "Edit CHANGELOG",
                    "kind": "edit", "status": "pending",
                    "locations": [{"path": "{cwd}/CHANGELOG.md"}]}},
        {"request": "session/request_permission", "params": {
            "sessionId": "{session}", "toolCall": {"toolCallId": "own"}, "options": allow}},
        {"write": "{cwd}/CHANGELOG.md", "text": "the agent's own edit, allowed\n"},
        {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "own",
                    "status": "completed"}},
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "stray", "title": "Write STRAY.md",
                    "kind": "edit", "status": "completed",
                    "locations": [{"path": "{cwd}/STRAY.md"}]}},
        {"usage": {"inputTokens": 40_000, "outputTokens": 8_213, "totalTokens": 48_213}},
        {"say": "Done."},
    ]  # fmt: skip


@pytest.fixture(scope="module")
def attempt(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real attempt of the steps above, its log and its pages: as written
    by default, and checked against a head the log does not end at."""
    root = tmp_path_factory.mktemp("reads")
    (root / "ws").mkdir()
    (root / "ws" / ".git" / "hooks").mkdir(parents=True)
    (root / "ws" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    outcome = trio.run(run_attempt, scripted_spec(root, _steps()))
    assert outcome.status == "completed", outcome.reason
    log = root / "audit.jsonl"
    done = _governor("audit", "report", str(log), "-o", str(root / "page.html"))
    assert done.returncode == 0, done.stderr
    wrong = "0" * 64
    _governor("audit", "report", str(log), "--head", wrong, "-o", str(root / "wrong-head.html"))
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return {"root": root, "log": log, "records": records, "outcome": outcome}


@pytest.fixture(scope="module")
def chromium() -> str:
    return find_chromium()


def _text(tools: DevTools, selector: str) -> str:
    """The text of the last element ``selector`` matches, as the page draws it
    once a reader has scrolled to it."""
    tools.reveal(selector)
    found = tools.eval(
        f"(Array.from(document.querySelectorAll({json.dumps(selector)})).pop() || {{}}).innerText"
    )
    assert isinstance(found, str), f"no {selector} on the page"
    return found


SEEN = """
((selector) => {
  const el = Array.from(document.querySelectorAll(selector)).pop();
  el.scrollIntoView({block: "start"});
  const box = el.getBoundingClientRect();
  const hit = document.elementFromPoint(box.left + 4, box.top + 4);
  return {left: box.left, right: box.right, width: box.width, height: box.height,
          on_top: hit === el || el.contains(hit), window: document.documentElement.clientWidth};
})
"""


def _seen(tools: DevTools, selector: str) -> None:
    """The last element ``selector`` matches is drawn, on top, inside the window's width (not scrolled
    away in a table's box)."""
    box = tools.eval(f"{SEEN}({json.dumps(selector)})")
    assert box["width"] > 0 and box["height"] > 0, (selector, box)
    assert box["left"] >= 0 and box["right"] <= box["window"] + 0.5, (selector, box)
    assert box["on_top"], (selector, box)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_page_shows_tokens_a_diff_and_a_command_output_at_any_width(
    attempt: dict[str, Any], chromium: str, tmp_path: Path, width: int
) -> None:
    page = attempt["root"] / "page.html"
    with devtools(chromium, tmp_path / "profile") as tools:
        tools.open(page.resolve().as_uri(), width, mobile=width < 600)
        measured = layout(tools)
        usage = _text(tools, "#usage-line")
        diff = _text(tools, "#changes .item.diff pre.diff")
        output = _text(tools, "#commands pre.tail")
        command = _text(tools, "#commands .item")
        notices = _text(tools, "#notices")
        for selector in ("#usage-line", "#changes pre.diff", "#commands pre.tail"):
            _seen(tools, selector)
        tools.screenshot(artifacts(tmp_path) / f"report-reads-{width}.png")
    assert measured["scroll_width"] <= measured["width"] and measured["outside"] == [], measured
    assert "48,213 tokens" in usage and "cost 0.37 USD" in usage, usage
    assert "40,000 in" in usage and "8,213 out" in usage, usage
    # the second write's diff: the line it removed and the one it added
    assert "-old = 2" in diff and "+new = 3" in diff, diff
    assert "exit 3" in command, command
    assert "first line" in output and output.rstrip().endswith("last words"), output
    assert "without asking" in notices, notices


def test_an_agents_hostile_text_in_a_diff_and_in_output_stays_text_and_secrets_are_masked(
    attempt: dict[str, Any], chromium: str, tmp_path: Path
) -> None:
    page = attempt["root"] / "page.html"
    html = page.read_text()
    assert TOKEN not in html and TOKEN not in attempt["log"].read_text()
    with devtools(chromium, tmp_path / "profile") as tools:
        tools.open(page.resolve().as_uri(), 1400)
        diff = _text(tools, "#changes .item.diff pre.diff")
        output = _text(tools, "#commands pre.tail")
        made = tools.eval(
            "({scripts: document.scripts.length, imgs: document.images.length, "
            "inside: document.querySelectorAll('pre.diff *:not(span), pre.tail *').length, "
            "title: document.title})"
        )
    assert HOSTILE in diff and HOSTILE in output  # as the agent wrote it, as text
    assert "[secret]" in diff and "[secret]" in output
    assert made == {"scripts": 1, "imgs": 0, "inside": 0, "title": made["title"]}
    assert made["title"].startswith("governor audit report: ")  # nothing ran


def test_identical_refusals_are_one_row_with_their_count(
    attempt: dict[str, Any], chromium: str, tmp_path: Path
) -> None:
    written = [r for r in attempt["records"] if r.get("verdict") == "deny"]
    counted = [r for r in attempt["records"] if r.get("kind") == "repeated"]
    assert len(written) + sum(r["count"] for r in counted) == REFUSALS
    with devtools(chromium, tmp_path / "profile") as tools:
        tools.open((attempt["root"] / "page.html").resolve().as_uri(), 1400)
        tools.reveal("#refusals tbody tr")
        rows = tools.eval(
            "Array.from(document.querySelectorAll('#refusals tbody tr'))"
            ".map(r => Array.from(r.cells).map(c => c.innerText))"
        )
        heading = _text(tools, "#refusals h2")
    assert heading == f"Refused ({REFUSALS})"
    assert len(rows) == 1, rows
    assert rows[0][1] == f"{REFUSALS}\u00d7" and "pre-commit" in rows[0][3], rows


def test_a_change_made_under_an_allowed_permission_is_explained_not_unasked(
    attempt: dict[str, Any], chromium: str, tmp_path: Path
) -> None:
    kinds = {
        (r["subject"].get("path") or r["subject"]["paths"][0]).rsplit("/", 1)[-1]: r["kind"]
        for r in attempt["records"]
        if r["kind"] in ("changed", "unasked")
    }
    assert kinds == {"CHANGELOG.md": "changed", "STRAY.md": "unasked", "calc.py": "unasked"}
    with devtools(chromium, tmp_path / "profile") as tools:
        tools.open((attempt["root"] / "page.html").resolve().as_uri(), 1400)
        unasked = _text(tools, "#unasked")
        changes = _text(tools, "#changes")
    assert "STRAY.md" in unasked and "Changes without asking (2)" in unasked
    assert "CHANGELOG.md" not in unasked
    item = next(i for i in changes.split("\n#") if "CHANGELOG.md" in i)
    assert "explained by rule named, tool call own, allowed at #" in item, item


def test_a_change_the_agent_made_itself_shows_its_diff_from_the_start_as_masked_text(
    attempt: dict[str, Any], chromium: str, tmp_path: Path
) -> None:
    """No governed write carried ``calc.py``'s edit, so no ``diff`` record: the
    lines come from the file as the attempt's start kept it, beside the change."""
    (own,) = [
        r
        for r in attempt["records"]
        if r["kind"] == "unasked" and r["subject"].get("path", "").endswith("calc.py")
    ]
    assert "-    return a - b" in own["diff"] and "+    return a + b" in own["diff"], own
    with devtools(chromium, tmp_path / "profile") as tools:
        tools.open((attempt["root"] / "page.html").resolve().as_uri(), 400, mobile=True)
        tools.eval("document.querySelectorAll('#unasked details').forEach(d => { d.open = true; })")
        diff = _text(tools, "#unasked pre.diff")
        made = tools.eval("document.querySelectorAll('#unasked pre.diff *:not(span)').length")
    assert "-    return a - b" in diff and "+    return a + b" in diff, diff
    assert HOSTILE in diff and "[secret]" in diff and TOKEN not in diff, diff
    assert made == 0


def test_the_anchor_is_said_calmly_when_unchecked_and_as_an_alarm_when_a_check_fails(
    attempt: dict[str, Any], chromium: str, tmp_path: Path
) -> None:
    found = {}
    with devtools(chromium, tmp_path / "profile") as tools:
        for name in ("page", "wrong-head"):
            tools.open((attempt["root"] / f"{name}.html").resolve().as_uri(), 1400)
            found[name] = tools.eval(
                "(e => ({text: e.innerText, css: e.className, "
                "colour: getComputedStyle(e).color}))(document.getElementById('anchor-result'))"
            )
    calm, alarm = found["page"], found["wrong-head"]
    assert "not checked against an anchor" in calm["text"] and "--head" in calm["text"], calm
    assert calm["css"] != "bad" and calm["colour"] != "rgb(198, 40, 40)", calm
    assert "rewritten" not in calm["text"]
    assert alarm["text"].startswith("NOT AUTHENTIC"), alarm
    assert alarm["css"] == "bad" and alarm["colour"] == "rgb(198, 40, 40)", alarm
