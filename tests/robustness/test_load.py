"""Load: twenty attempts at once in one process, and one attempt whose agent streams
100,000 updates. Nothing crosses attempts, every log verifies, memory stays bounded.

Peak RSS and time are measured and printed (``-s`` shows them); `bench/load.py`
has the figures against a baseline. The bounds asserted here are generous on
purpose: they catch a leak (memory that grows with the work), not a slow machine.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

import trio
from robustness_helpers import EDIT, GUARD, HERE, rss_mb, sample_rss

from governor.attempt.lifecycle import run_attempt
from governor.audit.verify import read_lines, verify
from governor.ending.outcome import Outcome
from governor.job.spec import AttemptSpec

ROOT = HERE.parents[1]
FLOOD = ROOT / "bench" / "flood_agent.py"
STREAM = HERE / "stream_agent.py"


def _flood_module() -> Any:
    spec = importlib.util.spec_from_file_location("flood_agent", FLOOD)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


flood = _flood_module()
FLOOD_N = 20


def mixed_specs(tmp_path: Path, count: int) -> list[AttemptSpec]:
    """Demo agents and flood agents, alternating, each in its own workspace and log."""
    specs = []
    for i in range(count):
        ws = tmp_path / f"a{i}" / "ws"
        ws.mkdir(parents=True)
        common: dict[str, Any] = {
            "workspace": ws,
            "policy": EDIT,
            "log": tmp_path / f"a{i}" / "audit.jsonl",
            "timeout": 120,
        }
        if i % 2:
            specs.append(AttemptSpec(prompt="make a hello program", agent="demo", **common))
        else:
            (ws / flood.READ_FILE).write_text(f"attempt {i} reads only this\n", encoding="utf-8")
            argv = [sys.executable, str(FLOOD), str(FLOOD_N)]
            specs.append(AttemptSpec(prompt="flood", argv=argv, **common))
    return specs


async def test_twenty_attempts_at_once_all_finish_with_their_own_decisions_and_logs(
    tmp_path: Path,
) -> None:
    specs = mixed_specs(tmp_path, 20)
    outcomes: dict[int, Outcome] = {}
    samples: list[tuple[Any, float]] = []

    async def one(i: int, spec: AttemptSpec) -> None:
        outcomes[i] = await run_attempt(spec)

    before = rss_mb()
    started = time.monotonic()
    with trio.fail_after(GUARD * 3):
        async with trio.open_nursery() as watch:
            watch.start_soon(sample_rss, samples)
            async with trio.open_nursery() as nursery:
                for i, spec in enumerate(specs):
                    nursery.start_soon(one, i, spec)
            watch.cancel_scope.cancel()
    elapsed = time.monotonic() - started
    growth = max(rss for _, rss in samples) - before
    print(f"\n20 attempts at once: {elapsed:.1f} s, peak RSS +{growth:.0f} MB over {before:.0f} MB")

    workspaces = [str(spec.workspace) for spec in specs]
    for i, spec in enumerate(specs):
        outcome = outcomes[i]
        assert outcome.status == "completed", (i, outcome.reason)
        assert outcome.acp is not None
        if i % 2:
            assert (Path(spec.workspace) / "hello.py").exists()
        else:
            report = flood.parse_report(outcome.summary or "")
            # Each read was checked by the agent against the file in its own workspace.
            assert (report["allowed"], report["reads_ok"]) == (FLOOD_N, FLOOD_N), (i, report)
            assert outcome.acp.tally.asked == 2 * FLOOD_N
        log = Path(str(spec.log))
        checked = verify(read_lines(log))
        assert checked.problem is None and checked.unfinished == () and checked.attempts == 1
        text = log.read_text()
        assert {r["attempt"] for _, r, _ in read_lines(log) if r} == {outcome.run_id}
        others = [w for j, w in enumerate(workspaces) if j != i]
        assert not [w for w in others if f"{w}/" in text or f'{w}"' in text], i
    assert growth < 20 * 30  # the target of bench/load.py, as a leak guard


async def test_a_stream_of_100000_updates_keeps_the_governors_memory_flat(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    seen = {"events": 0}

    def on_event(kind: str, info: dict[str, Any]) -> None:
        seen["events"] += 1

    spec = AttemptSpec(
        prompt="stream",
        argv=[sys.executable, str(STREAM), "100000"],
        workspace=ws,
        policy=EDIT,
        log=tmp_path / "audit.jsonl",
        timeout=300,
        on_event=on_event,
    )
    samples: list[tuple[Any, float]] = []
    with trio.fail_after(GUARD * 3):
        async with trio.open_nursery() as watch:
            watch.start_soon(sample_rss, samples, lambda: seen["events"])
            outcome = await run_attempt(spec)
            watch.cancel_scope.cancel()
    assert outcome.status == "completed", outcome.reason
    assert outcome.summary == "stream: 100000 sent"
    # The stream's events: every message chunk, tool call update and plan (3 in 5).
    assert seen["events"] >= 60_000
    warm = [rss for progress, rss in samples if progress >= 6_000]
    assert len(warm) >= 3, "too few samples to judge"
    growth = max(warm) - warm[0]
    print(f"\n100,000 updates: RSS {warm[0]:.0f} MB once warm, then +{growth:.1f} MB at most")
    assert growth < 25
    checked = verify(read_lines(tmp_path / "audit.jsonl"))
    assert checked.problem is None and checked.unfinished == ()
    json.dumps(outcome.to_json())
