"""Failures are not refusals (issue 37), through the real console script: an
agent (the scripted one, in its sandbox) that asks for a host the job allowed
but that does not resolve, over and over, and once for a host no rule allows.

``--fail-on refused`` counts the policy's refusal and not the failures; with
no refusal, the failures alone do not make exit 6. The step summary, ``governor
audit --refused`` and the report page each show the failures apart from the
refusals, the identical ones as one row with their count."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from checkout import needs_a_visible_checkout

pytestmark = needs_a_visible_checkout()

REPO = Path(__file__).resolve().parents[2]
GOVERNOR = Path(sys.executable).parent / "governor"
SCRIPTED = REPO / "tests" / "audit" / "scripted_agent.py"
TRIES = 5
NOWHERE = "api.nowhere.invalid"
"""Allowed by the job; ``.invalid`` never resolves (RFC 6761)."""
UNLISTED = "unlisted.example.test"
"""No rule allows it: the policy refuses it."""


def _run(tmp_path: Path, *, refused_too: bool, summary: Path | None = None) -> subprocess.CompletedProcess[str]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    shell = f"for i in $(seq {TRIES}); do curl -s -m 10 -o /dev/null http://{NOWHERE}/; done"
    if refused_too:
        shell += f"; curl -s -m 10 -o /dev/null http://{UNLISTED}/"
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"shell": shell}, {"say": "done"}]))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state")}
    if "PYTHONPATH" in os.environ:  # a checkout run as is: the governor its code
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    if summary is not None:
        env["GITHUB_STEP_SUMMARY"] = str(summary)
    argv = [str(GOVERNOR), "run", "--capability", "edit-workspace", "--workspace", str(ws),
            "--log", str(tmp_path / "audit.jsonl"), "--allow-host", f"{NOWHERE}:80",
            "--fail-on", "refused", "--json", "play the script",
            "--", sys.executable, str(SCRIPTED), "--script", str(script)]  # fmt: skip
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)


def _governor(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    return subprocess.run([str(GOVERNOR), *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


def test_failures_alone_do_not_fail_a_run_under_fail_on_refused(tmp_path: Path) -> None:
    done = _run(tmp_path, refused_too=False)
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "completed", outcome.get("reason")
    assert done.returncode == 0, done.stderr[-2000:]
    tally = outcome["acp"]["tally"]
    assert (tally["failed"], tally["refused"]) == (TRIES, 0), tally


def test_the_policys_refusal_fails_it_and_every_view_shows_the_failures_apart_grouped(
    tmp_path: Path,
) -> None:
    summary = tmp_path / "summary.md"
    done = _run(tmp_path, refused_too=True, summary=summary)
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "completed", outcome.get("reason")
    # The neighbour: a rule's refusal still makes exit 6, and only it is counted.
    assert done.returncode == 6, done.stderr[-2000:]
    assert "1 request(s) refused" in done.stderr and f"{TRIES} more failed" in done.stderr
    tally = outcome["acp"]["tally"]
    assert (tally["failed"], tally["refused"]) == (TRIES, 1), tally
    # The step summary: the tally's column, the refusal, the failures as one row.
    text = summary.read_text()
    assert "| asked | allowed | waited | refused | failed | reported | unasked |" in text
    refused_part, failed_part = text.split("**Refused**")[1].split("**Failed**")
    assert UNLISTED in refused_part and NOWHERE not in refused_part
    rows = [line for line in failed_part.splitlines() if NOWHERE in line]
    assert len(rows) == 1 and f"| {TRIES} |" in rows[0] and "| dns |" in rows[0], rows
    # governor audit --refused: the refusal, then the failures once with their count.
    log = str(tmp_path / "audit.jsonl")
    listed = _governor("audit", "--refused", log)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.count("refused by") == 1 and UNLISTED in listed.stdout
    assert listed.stdout.count(f"{NOWHERE}:80/ ({TRIES} times)") == 1, listed.stdout
    assert "failed (dns): " in listed.stdout
    # The report page: a Failed section of one row, apart from the Refused one.
    page = tmp_path / "report.html"
    made = _governor("audit", "report", log, "-o", str(page))
    assert made.returncode == 0, made.stderr
    html = page.read_text()
    refusals = html.split('<section id="refusals">')[1].split("</section>")[0]
    failures = html.split('<section id="failures">')[1].split("</section>")[0]
    assert UNLISTED in refusals and NOWHERE not in refusals
    assert f"Failed ({TRIES})" in failures
    assert len(re.findall(r'<tr class="failure">', failures)) == 1
    assert f"{TRIES}×" in failures
    # its timeline's rows say failed, the tally's word, not deny
    assert len(re.findall(r'data-verdict="failed"', html)) == TRIES
    # The attempt's story says the same.
    story = _governor("audit", "--attempt", outcome["run_id"], log)
    assert story.stdout.count("-> failed by protocol [network.dns]") == TRIES, story.stdout
    assert story.stdout.count("-> deny by capability [network.default]") == 1


def test_the_failures_are_each_recorded_with_what_happened(tmp_path: Path) -> None:
    _run(tmp_path, refused_too=False)
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    failed = [r for r in records if r.get("kind") == "network" and r.get("failed")]
    assert len(failed) == TRIES
    assert {(r["failed"], r["rule"], r["by"]) for r in failed} == {("dns", "network.dns", "protocol")}
