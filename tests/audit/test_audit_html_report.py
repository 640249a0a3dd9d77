"""`governor audit report LOG -o report.html`: one attempt as a self-contained page,
made from real attempts (the bundled demo through the console entry point, and
the scripted agent planting markup in its tool titles), read as HTML and opened
in a real headless Chromium (Debian's ``chromium``): one row per decision
record, the filters, the refusal's rule and reason, a planted ``<script>`` shown
as text, a screenshot kept as an artifact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import trio
from audit_helpers import scripted_spec
from browser import artifacts, browse, devtools, find_chromium

from governor import cli
from governor.attempt.lifecycle import run_attempt
from governor.audit.page_source import RESULT_KINDS
from governor.audit.verify import UNFINISHED

GOVERNOR = Path(sys.executable).parent / "governor"
SECRET = "planted-secret-value-5e81d2"
PLANT = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"


def _permission(
    call: str, title: str, kind: str, raw: dict[str, Any], locations: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call",
        "toolCallId": call,
        "title": title,
        "kind": kind,
        "status": "pending",
        "rawInput": raw,
    }
    if locations:
        update["locations"] = [{"path": p} for p in locations]
    options = [
        {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
        {"optionId": "no", "name": "Reject", "kind": "reject_once"},
    ]
    request = {"sessionId": "{session}", "toolCall": {"toolCallId": call, "rawInput": raw}}
    return [
        {"update": update},
        {"request": "session/request_permission", "params": {**request, "options": options}},
    ]


# Markup planted in three titles: an allowed command, a refused edit, an edit the
# agent reports having done without asking. Its report.txt is explained by the
# allowed call (`changed`); late.txt by nothing (`unasked`).
PLANTED_STEPS: list[Any] = [
    *_permission("c1", f"make-report {PLANT}", "execute", {"command": "make-report > {cwd}/report.txt"}),
    {"write": "{cwd}/report.txt", "text": "named by the redirect\n"},
    {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"}},
    *_permission("c2", f"Install hook {PLANT}", "edit",
                 {"file_path": "{cwd}/.git/hooks/pre-commit", "content": "x"},
                 ("{cwd}/.git/hooks/pre-commit",)),
    {"sleep": 0.05},
    {"write": "{cwd}/late.txt", "text": "after c1 completed\n"},
    {"update": {"sessionUpdate": "tool_call", "toolCallId": "c3", "title": f"Notes {PLANT}",
                "kind": "edit", "status": "completed", "locations": [{"path": "{cwd}/NOTES.md"}]}},
    {"say": "Done."},
]  # fmt: skip


class Logs:
    """Two real logs: the demo's alone, and one holding the demo's and the
    scripted agent's attempts."""

    def __init__(self, root: Path) -> None:
        self.root = root
        here = root / f"logs-{SECRET}"  # the secret in the log's own name, too
        here.mkdir()
        self.demo = here / "demo.jsonl"
        self.both = here / "both.jsonl"
        self.env = {**os.environ, "MY_SERVICE_TOKEN": SECRET}

    def records(self, log: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in log.read_text().splitlines()]

    def attempts(self, log: Path) -> list[str]:
        return list(dict.fromkeys(r["attempt"] for r in self.records(log)))

    def decisions(self, log: Path, attempt: str) -> list[dict[str, Any]]:
        return [
            r
            for r in self.records(log)
            if r["attempt"] == attempt
            and r["kind"] not in ("attempt-start", "attempt-end", *RESULT_KINDS)
        ]

    def governor(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [str(GOVERNOR), *args]
        return subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=120)

    def page(self, log: Path, name: str, *args: str) -> str:
        out = self.root / name
        done = self.governor("audit", "report", str(log), *args, "-o", str(out))
        assert done.returncode == 0, done.stderr
        return out.read_text()


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Logs:
    made = Logs(tmp_path_factory.mktemp("report"))
    ws = made.root / f"ws-{SECRET}"  # the secret is in every path the demo touches
    ws.mkdir()
    demo = made.governor("run", "--agent", "demo", "--capability", "edit-workspace",
                         "--workspace", str(ws), "--log", str(made.demo), "make hello")  # fmt: skip
    assert demo.returncode == 0, demo.stderr
    scripted = made.root / "scripted"
    scripted.mkdir()
    outcome = trio.run(run_attempt, scripted_spec(scripted, PLANTED_STEPS))
    assert outcome.status == "completed", outcome.reason
    made.both.write_bytes(made.demo.read_bytes() + (scripted / "audit.jsonl").read_bytes())
    return made


def audit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["audit", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


# -- choosing the attempt ---------------------------------------------------------------


def test_a_log_with_several_attempts_needs_attempt_and_the_error_names_them(
    logs: Logs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.html"
    code, _, err = audit(capsys, "report", str(logs.both), "-o", str(out))
    assert code == 2 and not out.exists()
    assert "--attempt" in err and all(a in err for a in logs.attempts(logs.both))


def test_an_id_that_names_no_attempt_names_the_choices(
    logs: Logs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.html"
    code, _, err = audit(capsys, "report", str(logs.both), "--attempt", "nope", "-o", str(out))
    assert code == 1 and not out.exists()
    assert "'nope'" in err and all(a in err for a in logs.attempts(logs.both))


def test_a_unique_prefix_picks_the_attempt_and_the_only_one_needs_no_id(
    logs: Logs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo, scripted = logs.attempts(logs.both)
    code, _, err = audit(capsys, "report", str(logs.both), "--attempt", "acp-", "-o", str(tmp_path / "a.html"))  # fmt: skip
    assert code == 0, err
    assert f"<code>{scripted}</code>" in (tmp_path / "a.html").read_text()
    code, _, err = audit(capsys, "report", str(logs.demo), "-o", str(tmp_path / "b.html"))
    assert code == 0, err
    assert f"<code>{demo}</code>" in (tmp_path / "b.html").read_text()


# -- the page as HTML -------------------------------------------------------------------


class Page(HTMLParser):
    """Every element of a page with its attributes, and its text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def all(self, tag: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag]


def test_the_page_is_self_contained_and_allows_only_its_own_style_and_script(
    logs: Logs,
) -> None:
    page = Page(logs.page(logs.demo, "contained.html"))
    assert len(page.all("script")) == 1 and len(page.all("style")) == 1
    for tag, attrs in page.tags:
        assert "src" not in attrs and "style" not in attrs, (tag, attrs)
        assert (attrs.get("href") or "#").startswith("#"), (tag, attrs)
        assert tag not in ("link", "img", "iframe", "object", "embed", "base"), tag
    (csp,) = [m for m in page.all("meta") if m.get("http-equiv") == "Content-Security-Policy"]
    policy = csp["content"] or ""
    assert "default-src 'none'" in policy and "unsafe-inline" not in policy


def test_the_header_tally_refusal_and_unasked_change_come_from_the_records(
    logs: Logs,
) -> None:
    (attempt,) = logs.attempts(logs.demo)
    records = logs.records(logs.demo)
    start, end = records[0], records[-1]
    text = " ".join(Page(logs.page(logs.demo, "demo.html")).text)
    for value in (start["preset"], start["policy"], start["policy_source"], start["ceiling"],
                  start["workspace"], end["status"], f"{end['duration_s']:.3f} s"):  # fmt: skip
        assert value in text, value
    (refused,) = [r for r in records if r.get("verdict") == "deny"]
    assert refused["rule"] in text and refused["reason"] in text
    (unasked,) = [r for r in records if r["kind"] == "unasked"]
    assert unasked["subject"]["title"] in text and "nothing explains it" in text
    assert "intact" in text and attempt in text


def test_a_change_an_allowed_call_explains_names_the_rule_and_the_decision(
    logs: Logs,
) -> None:
    _, scripted = logs.attempts(logs.both)
    html = logs.page(logs.both, "scripted.html", "--attempt", scripted)
    (changed,) = [r for r in logs.decisions(logs.both, scripted) if r["kind"] == "changed"]
    cause = changed["explained_by"]
    assert cause["rule"] == "named"
    assert f"rule <code>named</code>, tool call <code>{cause['tool_call']}</code>" in html
    assert f'allowed at <a href="#r{cause["seq"]}">#{cause["seq"]}</a>' in html
    assert f'id="r{cause["seq"]}"' in html  # the link lands on the decision's row


def test_a_script_planted_in_a_title_is_escaped_everywhere(logs: Logs) -> None:
    _, scripted = logs.attempts(logs.both)
    html = logs.page(logs.both, "planted.html", "--attempt", scripted)
    assert PLANT not in html and "<img" not in html and html.count("<script") == 1
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in html
    assert PLANT in " ".join(Page(html).text)  # shown, as text


def test_no_secret_reaches_the_page(logs: Logs) -> None:
    for log in (logs.demo, logs.both):
        for attempt in logs.attempts(log):
            html = logs.page(log, "secret.html", "--attempt", attempt)
            assert SECRET not in html


def test_a_tampered_log_is_reported_as_such_in_the_page(logs: Logs, tmp_path: Path) -> None:
    lines = logs.demo.read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace('"allow"', '"deny"', 1)
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(lines))
    done = logs.governor("audit", "report", str(edited), "-o", str(tmp_path / "t.html"))
    assert done.returncode == 0 and "does not verify" in done.stderr
    html = (tmp_path / "t.html").read_text()
    assert "TAMPERED: line 3 was edited" in html


def test_an_end_record_whose_tally_is_not_its_records_is_shown_apart(
    logs: Logs, tmp_path: Path
) -> None:
    lines = logs.demo.read_text().splitlines(keepends=True)
    assert '"asked":6,' in lines[-1]
    lines[-1] = lines[-1].replace('"asked":6,', '"asked":2,')
    edited = tmp_path / "tally.jsonl"
    edited.write_text("".join(lines))
    text = " ".join(Page(logs.page(edited, "tally.html")).text)
    assert f"TAMPERED: line {len(lines)} was edited" in text
    assert "the attempt-end record says 2 asked, 5 allowed" in text
    assert "not what its records count" in text


def test_an_attempt_the_governor_did_not_finish_says_so(logs: Logs, tmp_path: Path) -> None:
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(logs.demo.read_text().splitlines(keepends=True)[:-1]))
    html = logs.page(cut, "cut.html")
    text = " ".join(Page(html).text)
    assert f"unfinished: {UNFINISHED}" in text and f"this attempt: {UNFINISHED}" in text
    assert "(so far)" in text and "intact" in text


# -- the page in a real browser ---------------------------------------------------------

@pytest.fixture(scope="module")
def chromium() -> str:
    return find_chromium()


class Dom(Page):
    """The timeline's rows as Chromium left them: (data-verdict, data-kind, hidden)."""

    @property
    def rows(self) -> list[tuple[str | None, str | None, bool]]:
        return [
            (a.get("data-verdict"), a.get("data-kind"), "hidden" in a)
            for t, a in self.tags
            if t == "tr" and "data-kind" in a
        ]

    def visible(self) -> list[tuple[str | None, str | None]]:
        return [(v, k) for v, k, hidden in self.rows if not hidden]


def test_in_chromium_one_row_per_decision_record_and_the_filters_work(
    logs: Logs, chromium: str, tmp_path: Path
) -> None:
    (attempt,) = logs.attempts(logs.demo)
    decisions = logs.decisions(logs.demo, attempt)
    logs.page(logs.demo, "browse.html")
    page = logs.root / "browse.html"

    def dom(fragment: str = "") -> Dom:
        return Dom(browse(chromium, page, tmp_path / "profile", "--dump-dom", fragment=fragment))

    everything = dom()
    assert [(v, k) for v, k, _ in everything.rows] == [(r["verdict"], r["kind"]) for r in decisions]
    assert len(everything.visible()) == len(decisions)
    assert f"{len(decisions)} of {len(decisions)} decisions shown" in everything.text

    denied = dom("#verdict=deny")
    want = [(r["verdict"], r["kind"]) for r in decisions if r["verdict"] == "deny"]
    assert denied.visible() == want and len(want) == 1
    assert f"1 of {len(decisions)} decisions shown" in denied.text

    terminals = dom("#verdict=allow&kind=terminal,read")
    assert terminals.visible() == [
        (r["verdict"], r["kind"])
        for r in decisions
        if r["verdict"] == "allow" and r["kind"] in ("terminal", "read")
    ]
    assert len(terminals.visible()) == 2
    assert dom("#kind=permission").visible() == [
        (r["verdict"], r["kind"]) for r in decisions if r["kind"] == "permission"
    ]
    assert len(dom("#all=").visible()) == len(decisions)

    (refused,) = [r for r in decisions if r["verdict"] == "deny"]
    text = " ".join(denied.text)
    assert refused["rule"] in text and refused["reason"] in text


def test_in_chromium_a_planted_script_is_text_and_a_screenshot_is_kept(
    logs: Logs, chromium: str, tmp_path: Path
) -> None:
    _, scripted = logs.attempts(logs.both)
    logs.page(logs.both, "planted-browse.html", "--attempt", scripted)
    page = logs.root / "planted-browse.html"
    dom = Dom(browse(chromium, page, tmp_path / "profile", "--dump-dom"))
    assert len(dom.all("script")) == 1 and not dom.all("img")  # the planted ones are text
    text = " ".join(dom.text)
    assert text.count(PLANT) >= 4  # three titles in the timeline, and the refusal's
    assert f"governor audit report: {scripted}" in text  # the title the planted script would set
    assert len(dom.rows) == len(logs.decisions(logs.both, scripted))

    # The screenshots are CI artifacts: in $ACP_GOVERNOR_ARTIFACTS when set, never the repo.
    shots = artifacts(tmp_path)
    logs.page(logs.demo, "demo-shot.html")
    for name, shown in (("report-demo.png", logs.root / "demo-shot.html"), ("report-planted.png", page)):  # fmt: skip
        target = shots / name
        target.unlink(missing_ok=True)
        browse(chromium, shown, tmp_path / "profile", "--window-size=1280,1800", f"--screenshot={target}")  # fmt: skip
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and target.stat().st_size > 10_000


SHOWN = "document.querySelectorAll('#timeline tbody tr:not([hidden])').length"


def test_in_chromium_the_checkboxes_filter_the_rows_and_the_fragment_keeps_the_view(
    logs: Logs, chromium: str, tmp_path: Path
) -> None:
    (attempt,) = logs.attempts(logs.demo)
    decisions = logs.decisions(logs.demo, attempt)
    logs.page(logs.demo, "click.html")
    url = (logs.root / "click.html").resolve().as_uri()
    no_allow = [r for r in decisions if r["verdict"] != "allow"]
    neither = [r for r in no_allow if r["kind"] != "permission"]
    assert len(neither) < len(no_allow) < len(decisions)

    def click(group: str, value: str) -> str:
        return f"document.querySelector('#filters input[name={group}][value={value}]').click()"

    with devtools(chromium, tmp_path / "profile") as page:
        page.open(url)
        assert page.eval(SHOWN) == len(decisions)
        page.eval(click("verdict", "allow"))
        assert page.eval(SHOWN) == len(no_allow)
        assert page.eval("location.hash") == "#verdict=deny,unasked"
        page.eval(click("kind", "permission"))
        assert page.eval(SHOWN) == len(neither)
        shown = page.eval("document.getElementById('shown').textContent")
        assert shown == f"{len(neither)} of {len(decisions)} decisions shown"
        fragment = page.eval("location.hash")
        assert fragment.startswith("#verdict=deny,unasked&kind=") and "permission" not in fragment
        page.open(url + fragment)  # the link to this view opens it again
        assert page.eval(SHOWN) == len(neither)
        page.eval(click("kind", "permission"))
        page.eval(click("verdict", "allow"))
        assert page.eval(SHOWN) == len(decisions) and page.eval("location.hash") == "#all="
