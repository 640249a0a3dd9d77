"""The records that frame an attempt hold what a reader of the log needs to tell
its story without the outcome: the prompt in attempt-start and the agent's
summary in attempt-end, each masked before it is cut to its bound (a secret
across the cut leaves no prefix behind), from real attempts with the scripted
agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from audit_helpers import scripted_spec

from governor.attempt.lifecycle import run_attempt
from governor.attempt.start_end_records import PROMPT_CHARS, SUMMARY_CHARS, bounded
from governor.boundary.secrets import Masker

TOKEN = "ghp_R2l0SHViVG9rZW5Gb3JUZXN0c09ubHkxMjM0"


def _frame(log: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return records[0], records[-1]


def test_the_start_record_holds_the_prompt_masked_and_the_end_record_the_summary(
    tmp_path: Path,
) -> None:
    prompt = f"fix the tests; the token is {TOKEN}"
    steps = [{"say": f"Fixed both tests. Used {TOKEN}."}]
    outcome = trio.run(run_attempt, scripted_spec(tmp_path, steps, prompt=prompt))
    assert outcome.status == "completed", outcome.reason
    text = (tmp_path / "audit.jsonl").read_text()
    assert TOKEN not in text
    start, end = _frame(tmp_path / "audit.jsonl")
    assert start["kind"] == "attempt-start" and start["prompt"].startswith("fix the tests; the token is ")
    assert end["kind"] == "attempt-end" and end["summary"].startswith("Fixed both tests.")


def test_a_long_prompt_is_cut_with_its_length_said(tmp_path: Path) -> None:
    prompt = "x" * (PROMPT_CHARS + 500)
    outcome = trio.run(run_attempt, scripted_spec(tmp_path, [{"say": "ok"}], prompt=prompt))
    assert outcome.status == "completed", outcome.reason
    start, _ = _frame(tmp_path / "audit.jsonl")
    assert start["prompt"] == "x" * PROMPT_CHARS + f"... (cut: {PROMPT_CHARS + 500} characters)"


def test_a_secret_across_the_cut_is_masked_before_it_is_cut() -> None:
    masker = Masker()
    text = "a" * (SUMMARY_CHARS - 10) + " " + TOKEN
    kept = bounded(text, SUMMARY_CHARS, masker)
    assert kept is not None and TOKEN[:10] not in kept
    assert bounded(None, SUMMARY_CHARS, masker) is None
