"""Agent text reaches a person or a CI system as text: it cannot colour or move the
terminal, start a workflow command, or break out of the step summary's Markdown.

A real `governor run` with a stdlib agent that controls every string it sends:
its plan, a tool call's title, a file name it creates, its final message."""

from __future__ import annotations

import html
import html.parser
import json
import os
import subprocess
import sys
from pathlib import Path

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options

from governor.boundary import display

GOVERNOR = Path(sys.executable).parent / "governor"
SCRIPTED = Path(__file__).resolve().parents[1] / "audit" / "scripted_agent.py"

HOSTILE = [
    "\x1b[30;40mblack on black",
    "\x1b]52;c;aGVsbG8=\x07clipboard",
    "\x1b]0;a window title\x07",
    "line\rrewritten",
    "two\nlines",
    "\u2028separator",
    "\x9b31mC1 CSI",
    "\u202eevil\u202c bidi",
    "::stop-commands::tok",
    "\n::error::forged",
    "\n::add-mask::secret",
    "<details><summary>ok</summary>",
    "</td></tr></tbody></table><b>out</b>",
    "a `code` span` and ``two``",
    "| a | pipe |",
    "[click](https://attacker.example/)",
    "lone \udcff surrogate",
]
ON_THE_WIRE = [t for t in HOSTILE if "\udcff" not in t]
"""What an agent can send at all: a lone surrogate is refused by the wire
(`tests/connection/test_jsonrpc.py`)."""
ORDINARY = ["Añadir café ☕", "日本語のテスト", "👩‍💻 emoji with a joiner", "tabs\tare shown"]


@pytest.mark.parametrize("text", HOSTILE)
def test_nothing_in_a_terminal_line_acts(text: str) -> None:
    shown = display.terminal(text)
    assert all(c.isprintable() for c in shown), repr(shown)
    assert "\n" not in shown and "\r" not in shown and "\x1b" not in shown
    shown.encode("utf-8")  # a lone surrogate cannot kill the writer


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_unicode_shows_as_written(text: str) -> None:
    assert display.terminal(text) == text.replace("\t", "\\x09")


def test_a_cut_says_how_much_it_left_out() -> None:
    assert display.clip("x" * 1000, 10) == "xxxxxxxxxx... (990 more characters)"
    assert display.clip("short", 10) == "short"


def _script(tmp_path: Path) -> Path:
    entry = "\n".join(HOSTILE[:9]) + "\n::error::forged plan"
    steps = [
        {"update": {"sessionUpdate": "plan",
                    "entries": [{"content": entry, "status": "pending", "priority": "high"}]}},
        {"request": "session/request_permission",
         "params": {"sessionId": "{session}",
                    "toolCall": {"toolCallId": "t1", "title": "\n".join(ON_THE_WIRE), "kind": "execute",
                                 "rawInput": {"command": "rm -rf /\n::error::forged"}},
                    "options": [{"optionId": "y", "name": "Allow", "kind": "allow_once"},
                                {"optionId": "n", "name": "Reject", "kind": "reject_once"}]}},
        {"say": "BLOCKED: <details><summary>all fine</summary>\n\n| refused | 0 |\n|---|---|\n"
                "\x1b[8m::stop-commands::tok\n::error::forged"},
    ]  # fmt: skip
    path = tmp_path / "script.json"
    path.write_text(json.dumps(steps))
    return path


def _run(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "p.toml").write_text('capability = "edit-workspace"\n[deny]\ntools = ["execute"]\n')
    summary = tmp_path / "summary.md"
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary)}
    argv = [str(GOVERNOR), "run", "--workspace", str(ws), "--policy", str(tmp_path / "p.toml")]
    argv += ["--no-sandbox-agent", "--annotate", "--log", str(tmp_path / "audit.jsonl"), "go"]
    argv += ["--", sys.executable, str(SCRIPTED), "--script", str(_script(tmp_path))]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    return done, summary.read_text()


def test_no_agent_text_acts_on_the_terminal_or_starts_a_workflow_command(tmp_path: Path) -> None:
    done, _ = _run(tmp_path)
    out = done.stdout + done.stderr
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert "\u2028" not in out and "\u202e" not in out
    commands = [line for line in out.splitlines() if line.lstrip().startswith("::")]
    # only the governor's own annotations start a line: the refusal and the unasked file
    assert commands, out
    assert all(line.startswith(("::error title=acp-governor", "::warning file=")) for line in commands)
    assert not [line for line in commands if "stop-commands" in line.split("::")[1]]
    # the neighbour: the refusal and the agent's words are still there, as text
    assert "REFUSED" in done.stderr and "forged" in out
    assert "status  blocked" in done.stdout


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.cells: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)
        if tag == "tr":
            self.cells.append([])
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.cells[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def test_the_step_summary_renders_what_happened_and_nothing_the_agent_wrote_as_markup(
    tmp_path: Path,
) -> None:
    _, markdown = _run(tmp_path)
    # rendered as GitHub does before its sanitiser, raw HTML let through: the worst case
    rendered = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    parsed = _Tags()
    parsed.feed(rendered)
    assert set(parsed.tags) <= {"h3", "code", "p", "table", "thead", "tbody", "tr", "th", "td",
                                "strong", "ul", "li"}, rendered  # fmt: skip
    tally, *_ = [rows for rows in parsed.cells if rows and rows[0] == "asked"]
    assert len(tally) == 7
    header = parsed.cells[parsed.cells.index(tally) + 1]
    assert dict(zip(tally, header, strict=True))["refused"] == "1"  # the real tally
    refused = [row for row in parsed.cells if len(row) == 6 and row[1] == "permission"]
    assert len(refused) == 1
    assert refused[0][3] == "rule"  # what decided it: a rule of the policy
    assert "::error::forged" in refused[0][2]  # the agent's command, shown as text in its cell
    assert "&lt;details&gt;&lt;summary&gt;all fine" in rendered  # the agent's words, as text



@pytest.mark.parametrize("text", HOSTILE)
def test_a_code_span_or_cell_holds_its_text_whatever_the_text(text: str) -> None:
    markdown = f"| a | b |\n|---|---|\n| {display.markdown(text)} | {display.markdown_code(text)} |\n"
    rendered = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    parsed = _Tags()
    parsed.feed(rendered)
    assert set(parsed.tags) <= {"table", "thead", "tbody", "tr", "th", "td", "code"}, rendered
    assert [len(row) for row in parsed.cells] == [2, 2]  # no cell left, none added
    shown = display.terminal(" ".join(text.split()))
    assert html.unescape(parsed.cells[1][0]) == shown  # the text, as the terminal shows it


@pytest.mark.parametrize(
    "text",
    ["see https://attacker.example/x) now", "(http://a.example/p)", "go www.evil.example/a) ok",
     "WWW.evil.example/b)", "ftp://files.example/c)"],
)  # fmt: skip
def test_a_bare_url_in_agent_text_is_shown_as_written_never_linked(text: str) -> None:
    markdown = f"| a |\n|---|\n| {display.markdown(text)} |\n"
    rendered = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    parsed = _Tags()
    parsed.feed(rendered)
    assert "a" not in parsed.tags, rendered  # GFM's autolink would take "&#41;" into the link
    assert html.unescape(parsed.cells[1][0]) == text


def test_the_governor_s_own_link_and_ordinary_colons_in_agent_text_are_unchanged() -> None:
    for text in ("ratio 3:1 at 12:30", "wwwx.example is no host", "the www. prefix"):
        rendered = cmarkgfm.github_flavored_markdown_to_html(f"Reason: {display.markdown(text)}")
        assert rendered == f"<p>Reason: {html.escape(text, quote=False)}</p>\n"
    ours = "[the run](https://github.example/run/1)"  # the caller's own Markdown still links
    assert '<a href="https://github.example/run/1">' in cmarkgfm.github_flavored_markdown_to_html(ours)


def test_the_audit_views_show_the_logs_agent_text_as_text(tmp_path: Path) -> None:
    _run(tmp_path)
    log = str(tmp_path / "audit.jsonl")
    attempt = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[0])["attempt"]
    for view in ([log], ["--refused", log], ["--network", log], ["--attempt", attempt, log]):
        done = subprocess.run([str(GOVERNOR), "audit", *view], capture_output=True, text=True,
                              timeout=60)  # fmt: skip
        assert done.returncode == 0, (view, done.stderr)
        assert "\x1b" not in done.stdout and "\x07" not in done.stdout, view
    # the neighbour: the refusal is there, the agent's command as text
    refused = subprocess.run([str(GOVERNOR), "audit", "--refused", log], capture_output=True,
                             text=True, timeout=60).stdout  # fmt: skip
    assert "rm -rf /\\x0a::error::forged" in refused
