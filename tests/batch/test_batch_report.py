"""`governor audit report OUT -o batch.html` over a real `governor batch` output:
one page with a row per job (status, verdict, tally, changes without asking,
refusals) linking to each job's attempt page, written beside it; a crafted job
name in ``outcomes.jsonl`` cannot lead the reader outside the folder (the same
check, `governor.audit.record_shape.JOB_ID`, refuses it in the table too); and the
page in headless Chromium at 400 and 1,400 px, screenshots kept."""

from __future__ import annotations

import html
import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from browser import artifacts, devtools, find_chromium, layout
from conftest import GOVERNOR, demo_job, git, quitting_job

PLANT = "<script>document.title='pwned'</script>"


class Links(HTMLParser):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.scripts = 0
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs.append(dict(attrs).get("href") or "")
        self.scripts += tag == "script"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(GOVERNOR), *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A batch's output: two demo jobs (a prompt with markup in one) and one whose
    agent quits at once."""
    root = tmp_path_factory.mktemp("batch-report")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("# a project\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "first")
    jobs = [demo_job("hello-1", repo, prompt=f"Write hello {PLANT}"), quitting_job("quits", repo),
            demo_job("hello-2", repo)]  # fmt: skip
    (root / "jobs.jsonl").write_text("".join(json.dumps(j) + "\n" for j in jobs))
    done = _run("batch", str(root / "jobs.jsonl"), "--out", str(root / "out"), "--jobs", "2")
    assert done.returncode in (0, 1), done.stderr
    return root / "out"


def _outcomes(out: Path) -> dict[str, dict[str, Any]]:
    lines = [json.loads(x) for x in (out / "outcomes.jsonl").read_text().splitlines()]
    return {line["job"]: line for line in lines}


def _report(out: Path, page: Path) -> str:
    done = _run("audit", "report", str(out), "-o", str(page))
    assert done.returncode == 0, done.stderr
    return page.read_text()


def test_one_row_per_job_each_linking_to_its_attempt_page_beside_it(
    batch: Path, tmp_path: Path
) -> None:
    html = _report(batch, tmp_path / "batch.html")
    outcomes = _outcomes(batch)
    links = Links(html)
    assert links.scripts == 0 and "script-src &#x27;none&#x27;" in html  # (the CSP, escaped)
    assert sorted(links.hrefs) == sorted(f"batch.{job}.html" for job in outcomes)
    for job, line in outcomes.items():
        row = re.search(rf'<tr data-job="{job}">(.*?)</tr>', html, re.S)
        assert row, job
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
        assert line["status"] in cells[1]
        tally = line["acp"]["tally"]
        names = ("asked", "allowed", "waited", "refused", "failed", "reported", "unasked")
        assert cells[3:10] == [str(tally[c]) for c in names], (job, cells)
        assert cells[-1] == "intact, anchored"  # to the head on its outcome line
        page = (tmp_path / f"batch.{job}.html").read_text()
        assert f"<code>{line['run_id']}</code>" in page  # the job's own attempt
    assert PLANT not in html and PLANT not in (tmp_path / "batch.hello-1.html").read_text()
    assert f"{len(outcomes)} job(s)" in html and ", 2 refused," in html  # two demo jobs


def test_a_job_page_s_change_column_holds_the_patch_s_lines_for_the_file(
    batch: Path, tmp_path: Path
) -> None:
    _report(batch, tmp_path / "b.html")
    patch = (batch / "hello-1" / "changes.patch").read_text()
    notes = patch[patch.index("b/NOTES.md") :].split("diff --git", 1)[0]
    lines = [x for x in notes.splitlines() if x.startswith("+") and not x.startswith("+++")]
    assert lines
    page = (tmp_path / "b.hello-1.html").read_text()
    cell = re.search(r'<td class="change">(.*?)</td>', page, re.S)
    assert cell is not None
    assert cell.group(1).startswith(f"edit: NOTES.md changed (+{len(lines)} \u22120)")
    # and the file's own lines from the patch, each escaped, under "diff"
    assert "<details><summary>diff</summary><pre class=\"diff\">" in cell.group(1)
    for line in lines:
        assert f'<span class="add">{html.escape(line, quote=True)}</span>' in cell.group(1)


def test_a_job_name_that_leads_outside_the_folder_is_refused_naming_its_line(
    batch: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "out"
    subprocess.run(["cp", "-a", str(batch), str(copy)], check=True)
    outside = tmp_path / "elsewhere"  # a folder that looks like a job's, outside the output
    subprocess.run(["cp", "-a", str(copy / "hello-1"), str(outside)], check=True)
    line = {**_outcomes(copy)["hello-1"], "job": "../elsewhere"}
    with (copy / "outcomes.jsonl").open("a") as f:
        f.write(json.dumps(line) + "\n")
    n = len((copy / "outcomes.jsonl").read_text().splitlines())
    for args in (["audit", "report", str(copy), "-o", str(tmp_path / "r.html")], ["audit", str(copy)]):
        done = _run(*args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert f"outcomes.jsonl: line {n} is not a record" in done.stderr
        assert "one folder name inside the batch's folder, not a path" in done.stderr
    assert not list(tmp_path.glob("r*.html"))


def test_stdout_is_refused_for_a_batch_whose_report_is_several_pages(batch: Path) -> None:
    done = _run("audit", "report", str(batch), "-o", "-")
    assert done.returncode == 2 and "-o FILE.html" in done.stderr and not done.stdout


@pytest.mark.parametrize("width", [400, 1400])
def test_in_chromium_the_batch_page_fits_the_window_and_its_links_lead_to_the_pages(
    batch: Path, tmp_path: Path, width: int
) -> None:
    chromium = find_chromium()
    _report(batch, tmp_path / "batch.html")
    shots = artifacts(tmp_path)
    with devtools(chromium, tmp_path / "profile") as tools:
        tools.open((tmp_path / "batch.html").resolve().as_uri(), width, mobile=width < 600)
        measured = layout(tools)
        tools.screenshot(shots / f"report-batch-{width}.png")
        hrefs = tools.eval("Array.from(document.querySelectorAll('#batch a')).map(a => a.href)")
        assert measured["window"] == width
        assert measured["scroll_width"] <= measured["width"] and measured["outside"] == []
        assert sorted(hrefs) == sorted(
            (tmp_path / f"batch.{job}.html").resolve().as_uri() for job in _outcomes(batch)
        )
        tools.open(hrefs[0], width, mobile=width < 600)  # where a click on the link goes
        assert tools.eval("document.querySelectorAll('#status').length") == 1
        job = hrefs[0].rsplit("/", 1)[1].removeprefix("batch.").removesuffix(".html")
        tools.screenshot(shots / f"report-batch-job-{job}-{width}.png")
