"""The step summary as a person sees it on GitHub: the Markdown the governor
wrote for a hostile agent's attempt, rendered by GitHub's own cmark (raw HTML
let through, the worst case: GitHub's sanitiser comes after it) and drawn in a
real headless Chromium. What is drawn is read back from the page: the real
tally and the refusal are visible, and nothing the agent wrote became an
element (its `<details>` would fold the tally away, its `<table>` add a fake one)."""

from __future__ import annotations

import json
from pathlib import Path

import cmarkgfm
from browser import artifacts, devtools, find_chromium
from cmarkgfm.cmark import Options
from test_display_hostile import _run

DRAWN = """
(() => {
  const tags = [...new Set([...document.body.querySelectorAll("*")].map(e => e.tagName.toLowerCase()))];
  const tables = [...document.querySelectorAll("table")].map(t =>
    [...t.rows].map(r => [...r.cells].map(c => c.innerText)));
  const hidden = [...document.querySelectorAll("table, td, th")].filter(e => {
    const box = e.getBoundingClientRect();  /* a closed <details> keeps its boxes, drawn nowhere */
    return box.width === 0 || box.height === 0
      || !e.checkVisibility({checkOpacity: true, checkVisibilityCSS: true});
  }).length;
  return {tags, tables, hidden, text: document.body.innerText};
})()
"""


def _draw(tmp_path: Path, markdown: str, name: str) -> dict[str, object]:
    body = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    page = tmp_path / f"{name}.html"
    page.write_text(f'<!doctype html><meta charset="utf-8"><title>summary</title><body>{body}</body>')
    with devtools(find_chromium(), tmp_path / f"profile-{name}") as tools:
        tools.open(page.resolve().as_uri(), 1000)
        drawn: dict[str, object] = tools.eval(DRAWN)
        tools.screenshot(artifacts(tmp_path) / f"step-summary-{name}.png")
    return drawn


def test_the_drawn_step_summary_shows_the_real_tally_and_refusal_and_nothing_injected(
    tmp_path: Path,
) -> None:
    done, markdown = _run(tmp_path)
    assert "status  blocked" in done.stdout, done.stdout + done.stderr
    drawn = _draw(tmp_path, markdown, "hostile")
    tags = set(drawn["tags"])  # type: ignore[arg-type]
    assert tags <= {"h3", "code", "p", "table", "thead", "tbody", "tr", "th", "td", "strong",
                    "ul", "li"}, drawn["tags"]  # fmt: skip
    assert drawn["hidden"] == 0  # no table or cell folded away or drawn empty
    tables = drawn["tables"]
    assert isinstance(tables, list)
    (tally,) = [t for t in tables if t and t[0][:1] == ["asked"]]
    assert dict(zip(tally[0], tally[1], strict=True))["refused"] == "1"  # the real tally, drawn
    (refusals,) = [t for t in tables if t and "reason" in t[0]]
    assert len(refusals) == 2 and refusals[1][1] == "permission", json.dumps(refusals)
    assert "::error::forged" in refusals[1][2]  # the agent's command, drawn as text
    # the agent's "all fine" folder and fake "refused 0" table are text on the page
    assert "<details><summary>all fine</summary>" in str(drawn["text"])


def test_the_same_markup_written_by_us_would_be_drawn(tmp_path: Path) -> None:
    """The neighbour, showing the check above can fail: raw HTML that is not
    escaped becomes elements in this renderer and this browser."""
    drawn = _draw(tmp_path, "<details><summary>all fine</summary>\n\n| refused | 0 |\n|---|---|\n", "raw")
    assert "details" in set(drawn["tags"])  # type: ignore[arg-type]
    assert drawn["hidden"] != 0  # the table folded inside a closed <details>
    assert drawn["tables"] == [[["", ""]]]  # and its cells drawn as nothing
