"""A hopeless agent -- one that keeps sending lines that are not JSON-RPC -- ends the
attempt ``failed`` with a reason naming what it sent; a sloppy one that also sends
real messages is served to the end.

The rule (`governor.acp.peer`): 1,000 malformed lines in a row, or more than
10,000 malformed lines that are more than 9 in 10 of everything the agent sent.
Each test has its control: the same garbage just under the line completes.
"""

from __future__ import annotations

import json
from pathlib import Path

import trio
from robustness_helpers import GUARD, fault_spec, none_left

from governor.attempt.lifecycle import run_attempt
from governor.audit.verify import read_lines, verify
from governor.ending.outcome import Outcome


async def test_an_agent_that_only_sends_garbage_fails_naming_what_it_sent(
    tmp_path: Path, marker: str
) -> None:
    with trio.fail_after(GUARD):
        outcome = await run(tmp_path, marker, "0")
    assert outcome.status == "failed"
    reason = outcome.reason or ""
    assert "sent 1,000 lines in a row that are not JSON-RPC" in reason, reason
    assert "not JSON" in reason and "not UTF-8" in reason and "batches" in reason
    assert "the governor stopped listening to it" in reason
    assert await none_left(marker) == []
    checked = verify(read_lines(tmp_path / "audit.jsonl"))
    assert checked.problem is None and checked.unfinished == ()


async def test_999_bad_lines_in_a_row_are_answered_and_the_turn_completes(
    tmp_path: Path, marker: str
) -> None:
    with trio.fail_after(GUARD):
        outcome = await run(tmp_path, marker, "999")
    assert outcome.status == "completed", outcome.reason
    assert outcome.summary == "done"


async def test_garbage_with_a_real_message_now_and_then_fails_once_nine_lines_in_ten_are_bad(
    tmp_path: Path, marker: str
) -> None:
    # 20 bad lines, then one good one, forever: never 1,000 in a row, but 95% bad.
    with trio.fail_after(GUARD):
        outcome = await run(tmp_path, marker, "0/20")
    assert outcome.status == "failed"
    reason = outcome.reason or ""
    assert "lines that are not JSON-RPC out of" in reason, reason
    sent, total = (
        int(reason.split(word)[1].split(" ")[0].replace(",", "")) for word in ("sent ", "out of ")
    )
    assert sent > 10_000 and sent * 10 > total * 9


async def test_a_sloppy_agent_with_mostly_bad_lines_below_nine_in_ten_is_served_to_the_end(
    tmp_path: Path, marker: str
) -> None:
    # 8 bad lines per good one (89% bad), 20,000 bad lines in all: under the rule.
    with trio.fail_after(GUARD):
        outcome = await run(tmp_path, marker, "20000/8")
    assert outcome.status == "completed", outcome.reason


async def run(tmp_path: Path, marker: str, arg: str) -> Outcome:
    outcome = await run_attempt(fault_spec(tmp_path, "garbage", marker, arg))
    json.dumps(outcome.to_json())  # the outcome of a hopeless agent is still plain JSON
    return outcome
