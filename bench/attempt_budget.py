"""The attempt budget's watcher (`governor.sandbox.host.budget`): what it costs an
attempt with many commands.

One run, rounds interleaved: the same attempt (``governor run`` in this
process, its agent `bench/commands_agent.py` holding H sleeping children in
its sandbox and running N commands one after another in the session's
sandbox) with the watcher on, as every attempt has it, and off (`watch`
replaced by a task that returns at once: the budget still made, every sandbox
still registered, the attempt's pids group still made for root). Printed: the
median wall of each, their ratio, and the watcher's own measures (how many per
attempt, the median and longest, the share of the wall they took).
Target: on / off <= 1.05.

A third arm, ``rss``: the watcher as it was before it counted the memory held
as files (`budget.held_in_files` returning 0: RSS only), so that what that
count adds per measure is read against the watcher it extends (on / rss, and
the added part's own median and longest per measure).

Run: ``.venv/bin/python bench/attempt_budget.py [--commands N] [--held H] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from governor import cli
from governor.sandbox.host import budget

AGENT = Path(__file__).with_name("commands_agent.py")
REAL_WATCH = budget.watch
REAL_COUNT = budget.AttemptBudget.count
REAL_FILES = budget.held_in_files
measures: list[float] = []
file_measures: list[float] = []


def timed_files(pids: list[int]) -> int:
    start = time.perf_counter()
    try:
        return REAL_FILES(pids)
    finally:
        file_measures.append(time.perf_counter() - start)


def no_files(pids: list[int]) -> int:
    return 0


def timed_count(self: budget.AttemptBudget, running: list[budget.Sandboxed]) -> budget.Usage:
    start = time.perf_counter()
    try:
        return REAL_COUNT(self, running)
    finally:
        measures.append(time.perf_counter() - start)


async def no_watch(*_: object) -> None:
    return None


def attempt(base: Path, count: int, held: int, watcher: bool, files: bool = True) -> float:
    budget.watch = REAL_WATCH if watcher else no_watch  # type: ignore[assignment]
    budget.held_in_files = timed_files if files else no_files
    ws = Path(tempfile.mkdtemp(prefix="ws-", dir=base))
    policy = base / "policy.toml"
    argv = ["run", "--json", "--policy", str(policy), "--workspace", str(ws),
            "--log", str(ws.with_suffix(".jsonl")), "go", "--", sys.executable, str(AGENT),
            str(count), str(held)]  # fmt: skip
    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = cli.main(argv)
    took = time.perf_counter() - start
    outcome = json.loads(out.getvalue())
    assert code == 0 and outcome["status"] == "completed", outcome
    assert outcome.get("summary") == f"commands: {count}", outcome["status"]
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=200)
    parser.add_argument("--held", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    budget.AttemptBudget.count = timed_count  # type: ignore[method-assign]
    base = Path(tempfile.mkdtemp(prefix="bench-budget-", dir=os.environ.get("TMPDIR")))
    (base / "policy.toml").write_text('capability = "edit-workspace"\n[limits]\nprocesses = 512\n')
    on: list[float] = []
    off: list[float] = []
    rss: list[float] = []
    per_attempt: list[int] = []
    on_measures: list[float] = []
    rss_measures: list[float] = []
    for _ in range(args.rounds):
        before = len(measures)
        on.append(attempt(base, args.commands, args.held, True))
        per_attempt.append(len(measures) - before)
        on_measures += measures[before:]
        off.append(attempt(base, args.commands, args.held, False))
        before = len(measures)
        rss.append(attempt(base, args.commands, args.held, True, files=False))
        rss_measures += measures[before:]
        del measures[before:]
    won, woff, wrss = statistics.median(on), statistics.median(off), statistics.median(rss)
    user = "root" if os.getuid() == 0 else f"uid {os.getuid()}"
    print(f"{args.commands} commands, {args.held} held children, {args.rounds} rounds, "
          f"as {user}, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"watcher off: {woff:7.2f} s   (runs {', '.join(f'{t:.2f}' for t in off)})")
    print(f"watcher on:  {won:7.2f} s   (runs {', '.join(f'{t:.2f}' for t in on)}) = {won / woff:.3f} x off")
    print(f"RSS only:    {wrss:7.2f} s   (runs {', '.join(f'{t:.2f}' for t in rss)}) = "
          f"{wrss / woff:.3f} x off; on = {won / wrss:.3f} x RSS only")  # fmt: skip
    if rss_measures and on_measures:
        print(f"a measure: median {statistics.median(on_measures) * 1e3:.2f} ms with the files, "
              f"{statistics.median(rss_measures) * 1e3:.2f} ms RSS only")  # fmt: skip
    if file_measures:
        print(f"the files' part: median {statistics.median(file_measures) * 1e3:.2f} ms, "
              f"longest {max(file_measures) * 1e3:.2f} ms per measure")  # fmt: skip
    if measures:
        share = sum(measures) / sum(on)
        print(f"measures: {statistics.median(per_attempt):.0f} per attempt, median "
              f"{statistics.median(measures) * 1e3:.2f} ms, longest {max(measures) * 1e3:.2f} ms, "
              f"{share * 100:.2f} % of the wall (in a worker thread)")  # fmt: skip


if __name__ == "__main__":
    main()
