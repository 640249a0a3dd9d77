"""The attempt page is readable in a phone's width and in a wide window: opened in a
real headless Chromium at 400 px (laid out as a phone lays it out, where a page
without a viewport tag is drawn 980 px wide) and at 1,400 px, the layout
measured in the page through DevTools (the page's own policy intact): nothing
wider than the window but the tables, which scroll in their own box; every
tally count drawn, on top, inside the window. The pages: the demo's attempt,
and one whose agent sent long unbroken titles, commands and paths. Screenshots
of each go to $ACP_GOVERNOR_ARTIFACTS."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import trio
from audit_helpers import scripted_spec
from browser import artifacts, devtools, find_chromium, layout

from governor.attempt.lifecycle import run_attempt

GOVERNOR = Path(sys.executable).parent / "governor"
WIDTHS = (400, 1400)
LONG = "x" * 300  # one word a browser cannot break at a space


def _governor(*args: str) -> None:
    done = subprocess.run(
        [str(GOVERNOR), *args], capture_output=True, text=True, timeout=120, env=os.environ
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, int]]]:
    """The demo's page and the long-words page, with the tally each shows."""
    root = tmp_path_factory.mktemp("layout")
    ws = root / "ws"
    ws.mkdir()
    _governor("run", "--agent", "demo", "--capability", "edit-workspace", "--workspace", str(ws),
              "--log", str(root / "demo.jsonl"), "make hello")  # fmt: skip
    _governor("audit", "report", str(root / "demo.jsonl"), "-o", str(root / "demo.html"))
    scripted = root / "long"
    scripted.mkdir()
    path = "{cwd}/" + "/".join([LONG[:60]] * 4) + ".txt"
    steps: list[Any] = [
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": f"Edit {LONG}",
                    "kind": "edit", "status": "pending", "rawInput": {"command": LONG * 3}}},
        {"request": "session/request_permission", "params": {
            "sessionId": "{session}", "toolCall": {"toolCallId": "t1", "rawInput": {"command": f"rm {LONG}"}},
            "options": [{"optionId": "no", "name": "Reject", "kind": "reject_once"}]}},
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "t2", "title": f"Notes {LONG}",
                    "kind": "edit", "status": "completed", "locations": [{"path": path}]}},
        {"say": f"Done: {LONG}"},
    ]  # fmt: skip
    outcome = trio.run(run_attempt, scripted_spec(scripted, steps, prompt=f"Do {LONG} now"))
    assert outcome.status == "completed", outcome.reason
    _governor("audit", "report", str(scripted / "audit.jsonl"), "-o", str(root / "long.html"))
    tallies = {}
    for name, log in (("demo", root / "demo.jsonl"), ("long", scripted / "audit.jsonl")):
        from governor.audit.reading import read_log, row

        tallies[name] = asdict(row(read_log(log).attempts[0]).tally)
    return {name: (root / f"{name}.html", tallies[name]) for name in ("demo", "long")}


@pytest.fixture(scope="module")
def chromium() -> str:
    return find_chromium()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", ["demo", "long"])
def test_the_attempt_page_fits_the_window_and_shows_every_tally_count(
    pages: dict[str, tuple[Path, dict[str, int]]], chromium: str, tmp_path: Path, name: str, width: int
) -> None:
    page, tally = pages[name]
    with devtools(chromium, tmp_path / "profile") as tools:
        tools.open(page.resolve().as_uri(), width, mobile=width < 600)
        measured = layout(tools)
        tools.screenshot(artifacts(tmp_path) / f"report-{name}-{width}.png")
    assert measured["window"] == width and measured["width"] > width - 20  # (a scroll bar)
    width = measured["width"]
    assert measured["scroll_width"] <= width, measured
    assert measured["outside"] == []
    assert [c["id"] for c in measured["counts"]] == [f"tally-{c}" for c in tally]
    for count in measured["counts"]:
        assert count["text"] == str(tally[count["id"].removeprefix("tally-")])
        assert count["on_top"] and count["width"] > 0, count
        assert count["left"] >= 0 and count["right"] <= width, count
    assert all(box["width"] <= width for box in measured["boxes"])
    # a table wider than a phone scrolls in its own box (whether one is that wide
    # depends on the paths in it, so the rule is held for each box there is)
    assert all(box["width"] <= width for box in measured["boxes"] if box["inner"] > box["width"])


def test_without_its_viewport_tag_a_phone_would_draw_the_page_980_px_wide(
    pages: dict[str, tuple[Path, dict[str, int]]], chromium: str, tmp_path: Path
) -> None:
    page, _ = pages["demo"]
    bare = tmp_path / "no-viewport.html"
    text = page.read_text()
    tag = '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
    assert tag in text
    bare.write_text(text.replace(tag, ""))
    with devtools(chromium, tmp_path / "profile") as tools:
        tools.open(bare.resolve().as_uri(), 400, mobile=True)
        assert layout(tools)["window"] == 980  # what the measure above would catch
