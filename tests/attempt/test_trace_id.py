"""The trace id of an attempt (`AttemptSpec.trace_id`) joins its trace and its log:
it is in the attempt-start record and in the outcome."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from governor import cli
from governor.attempt.lifecycle import run_attempt
from governor.job.spec import AttemptSpec, RefusedBeforeStart
from governor.policies.policy import parse_policy

EDIT = parse_policy('capability = "edit-workspace"', "test")
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def spec(tmp_path: Path, **kw: object) -> AttemptSpec:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return AttemptSpec(
        prompt="make a hello program",
        agent="demo",
        workspace=ws,
        policy=EDIT,
        log=tmp_path / "audit.jsonl",
        timeout=60,
        **kw,  # type: ignore[arg-type]
    )


async def test_the_trace_id_is_in_the_first_record_and_in_the_outcome_and_the_story(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = await run_attempt(spec(tmp_path, trace_id=TRACE))
    assert outcome.status == "completed", outcome.reason
    assert outcome.trace_id == TRACE and outcome.to_json()["trace_id"] == TRACE
    first = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[0])
    assert first["kind"] == "attempt-start" and first["trace_id"] == TRACE
    assert cli.main(["audit", "--attempt", outcome.run_id, str(tmp_path / "audit.jsonl")]) == 0
    story = capsys.readouterr().out.splitlines()
    assert "started demo" in story[1] and story[1].endswith(f", trace {TRACE}")


async def test_without_a_trace_neither_the_log_nor_the_outcome_has_a_trace_id(
    tmp_path: Path,
) -> None:
    outcome = await run_attempt(spec(tmp_path))
    assert outcome.trace_id is None and "trace_id" not in outcome.to_json()
    first = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[0])
    assert "trace_id" not in first


@pytest.mark.parametrize("bad", ["", "0" * 32, TRACE.upper(), TRACE[:-1], TRACE + "0"])
async def test_a_trace_id_that_is_not_one_is_refused_before_start(
    tmp_path: Path, bad: str
) -> None:
    with pytest.raises(RefusedBeforeStart) as e:
        await run_attempt(spec(tmp_path, trace_id=bad))
    assert any("not a trace id" in p for p in e.value.problems)
    assert not (tmp_path / "audit.jsonl").exists()


