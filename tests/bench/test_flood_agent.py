"""The flood agent of `bench/roundtrip.py` round-trips for real, so the bench cannot rot silently.

Real subprocesses over real pipes: the flood agent driven by the governor
(`run_attempt`), and the bench script itself run end to end with a tiny N.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from governor.attempt.lifecycle import run_attempt
from governor.audit.reading import decision_records
from governor.audit.verify import read_lines, verify
from governor.job.spec import AttemptSpec
from governor.policies.policy import parse_policy

ROOT = Path(__file__).resolve().parents[2]
FLOOD = ROOT / "bench" / "flood_agent.py"
ROUNDTRIP = ROOT / "bench" / "roundtrip.py"
# Loaded from its file: bench/ is not put on sys.path (its scripts are named like the
# project's packages).
_spec = importlib.util.spec_from_file_location("flood_agent", FLOOD)
assert _spec is not None and _spec.loader is not None
flood_agent = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(flood_agent)
EDIT_FILE: str = flood_agent.EDIT_FILE
READ_FILE: str = flood_agent.READ_FILE
parse_report = flood_agent.parse_report

N = 5


def flood_spec(tmp_path: Path, capability: str) -> AttemptSpec:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / READ_FILE).write_text("read me\n", encoding="utf-8")
    return AttemptSpec(
        prompt="flood",
        argv=[sys.executable, str(FLOOD), str(N)],
        workspace=ws,
        policy=parse_policy(f'capability = "{capability}"', "test"),
        log=tmp_path / "audit.jsonl",
        sandbox_agent=False,
        timeout=60,
    )


async def test_the_flood_agent_gets_every_ask_allowed_and_every_read_answered_by_the_governor(
    tmp_path: Path,
) -> None:
    outcome = await run_attempt(flood_spec(tmp_path, "edit-workspace"))
    assert outcome.status == "completed", outcome.reason
    report = parse_report(outcome.summary or "")
    assert (report["n"], report["allowed"], report["reads_ok"]) == (N, N, N)
    assert outcome.acp is not None
    assert (outcome.acp.tally.asked, outcome.acp.tally.allowed) == (2 * N, 2 * N)
    checked = verify(read_lines(tmp_path / "audit.jsonl"))
    assert checked.problem is None and checked.records == 2 * N + 2
    asks = [r for r in decision_records(outcome.log, outcome.run_id) if r["kind"] == "permission"]
    assert [r["subject"]["paths"] for r in asks] == [[str(tmp_path / "ws" / EDIT_FILE)]] * N
    assert {r["option"] for r in asks} == {"allow"}


async def test_a_refused_ask_shows_in_the_flood_report_so_a_wrong_answer_cannot_pass(
    tmp_path: Path,
) -> None:
    outcome = await run_attempt(flood_spec(tmp_path, "read-only"))
    report = parse_report(outcome.summary or "")
    assert (report["allowed"], report["reads_ok"]) == (0, N)
    assert outcome.acp is not None and outcome.acp.tally.refused == N


def test_the_bench_runs_every_variant_end_to_end_and_prints_the_ratios() -> None:
    done = subprocess.run(
        [sys.executable, str(ROUNDTRIP), "--n", str(N), "--reps", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {line.split()[0] for line in done.stdout.splitlines() if line.strip()}
    assert {"floor", "sdk", "governor", "governor-always"} <= rows
    assert "c/b = " in done.stdout and "c/a = " in done.stdout
