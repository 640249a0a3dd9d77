"""Load: attempts at once, and the notification rate of one attempt, against baselines.

    python bench/load.py [--levels 1,5,20] [--rounds 3] [--notifications 200000] [--repeat 3]

Concurrent attempts: for each level K, a fresh process runs `--rounds` rounds of
K attempts at once through the library (`run_attempt`), half the bundled demo
agent (permissions, writes, a sandboxed command, a refusal, an unasked change)
and half `bench/flood_agent.py` (20 permission asks and 20 reads), every agent
inside the agent sandbox. Printed per level: attempts per minute (best round)
and the process's peak RSS; the figure to watch is the peak RSS per
*additional* attempt, ``(peak(K) - peak(1)) / (K - 1)`` -- target under 30 MB.
Each level runs in its own process so that its peak is its own. Also printed,
for information: the peak proportional set size of the whole process tree (the
agents, their sandboxes and the session sandboxes' fork servers included).

Notifications: one attempt whose agent (`tests/robustness/stream_agent.py`)
streams `--notifications` ``session/update`` lines, timed from the first
message event to the last (the governor parses, validates with the ACP schema
and folds each one). Baseline, in the same run: a bare trio loop that reads the
same agent's stdout, splits lines and ``json.loads`` each, nothing else.
Target: the governor at no less than half the bare rate. Best of `--repeat`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script, this file has bench/ first on sys.path, and bench/ holds scripts
# whose names shadow packages (a script named like a package, as bench/sandbox.py was): keep bench/ off, the project on.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import orjson  # noqa: E402
import trio  # noqa: E402

from governor.attempt.lifecycle import run_attempt  # noqa: E402
from governor.cli.run import freeze_startup_heap  # noqa: E402
from governor.job.spec import AttemptSpec  # noqa: E402
from governor.observe import logs  # noqa: E402
from governor.policies.policy import parse_policy  # noqa: E402

ROOT = HERE.parent
FLOOD = HERE / "flood_agent.py"
STREAM = ROOT / "tests" / "robustness" / "stream_agent.py"
EDIT = parse_policy('capability = "edit-workspace"', "bench/load.py")
FLOOD_N = 20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def tree_pss_mb() -> float:
    """Proportional set size of this process and all its descendants (agents,
    their sandboxes, the session sandboxes' fork servers), in MB."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            continue
    return total / 1024


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


# -- concurrent attempts (one level, in a child process) -----------------------------


def specs(tmp: Path, round_: int, count: int) -> list[AttemptSpec]:
    out = []
    for i in range(count):
        ws = tmp / f"r{round_}-a{i}" / "ws"
        ws.mkdir(parents=True)
        common: dict[str, Any] = {
            "workspace": ws,
            "policy": EDIT,
            "log": ws.parent / "audit.jsonl",
            "timeout": 300,
        }
        if i % 2:
            out.append(AttemptSpec(prompt="make a hello program", agent="demo", **common))
        else:
            (ws / "flood-read.txt").write_text(f"attempt {i}\n", encoding="utf-8")
            argv = [sys.executable, str(FLOOD), str(FLOOD_N)]
            out.append(AttemptSpec(prompt="flood", argv=argv, **common))
    return out


async def level(count: int, rounds: int, tmp: Path) -> dict[str, Any]:
    before = rss_mb()
    best = float("inf")
    failed = 0
    tree_peak = 0.0
    sampling = trio.Event()

    async def sample() -> None:
        nonlocal tree_peak
        while not sampling.is_set():
            tree_peak = max(tree_peak, tree_pss_mb())
            await trio.sleep(0.2)

    async with trio.open_nursery() as sampler:
        sampler.start_soon(sample)
        best, failed = await rounds_of(count, rounds, tmp)
        sampling.set()
    return {
        "level": count,
        "seconds": best,
        "per_minute": count * 60 / best,
        "peak_rss_mb": peak_rss_mb(),
        "tree_pss_mb": tree_peak,
        "rss_before_mb": before,
        "failed": failed,
    }


async def rounds_of(count: int, rounds: int, tmp: Path) -> tuple[float, int]:
    best = float("inf")
    failed = 0
    for r in range(rounds):
        batch = specs(tmp, r, count)
        statuses: list[str] = []

        async def one(spec: AttemptSpec, statuses: list[str] = statuses) -> None:
            statuses.append((await run_attempt(spec)).status)

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for spec in batch:
                nursery.start_soon(one, spec)
        best = min(best, time.perf_counter() - started)
        failed += sum(1 for s in statuses if s != "completed")
    return best, failed


def run_level(count: int, rounds: int) -> dict[str, Any]:
    """One level in a fresh process, so that its peak RSS is its own."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(count), "--rounds", str(rounds)],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"level {count} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# -- notifications ------------------------------------------------------------------


async def governor_rate(n: int, tmp: Path) -> float:
    ws = tmp / "stream-ws"
    ws.mkdir(exist_ok=True)
    marks: dict[str, float] = {}

    def on_event(kind: str, info: dict[str, Any]) -> None:
        if kind == "message":
            now = time.perf_counter()
            marks.setdefault("first", now)
            if str(info.get("text", "")).startswith("stream:"):
                marks["last"] = now

    spec = AttemptSpec(
        prompt="stream",
        argv=[sys.executable, str(STREAM), str(n)],
        workspace=ws,
        policy=EDIT,
        log=tmp / "stream-audit.jsonl",
        timeout=600,
        on_event=on_event,
    )
    outcome = await run_attempt(spec)
    if outcome.status != "completed" or "last" not in marks:
        raise SystemExit(f"the stream attempt did not complete: {outcome.reason}")
    return (n - 1) / (marks["last"] - marks["first"])


async def bare_rate(n: int, loads: Any = json.loads) -> float:
    """Read the same agent's stream with a line split and ``loads``, nothing else."""
    process = await trio.lowlevel.open_process(
        [sys.executable, str(STREAM), str(n), "--now"], stdout=subprocess.PIPE
    )
    assert process.stdout is not None
    count = 0
    rest = b""
    first = last = 0.0
    try:
        while chunk := await process.stdout.receive_some(256 * 1024):
            if not first:
                first = time.perf_counter()
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                loads(line)
            count += len(lines)
            last = time.perf_counter()
    finally:
        await process.wait()
    if count != n:
        raise SystemExit(f"the bare loop read {count} lines, expected {n}")
    return (n - 1) / (last - first)


# -- main ---------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="1,5,20")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--notifications", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()

    logs.configure(json_lines=False, level=logging.ERROR)  # errors only, on stderr
    freeze_startup_heap()  # as `governor run` does before its attempt
    if args.child:
        with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
            print(json.dumps(trio.run(level, args.child, args.rounds, Path(tmp))))
        return 0

    levels = [int(x) for x in args.levels.split(",") if x]
    if levels:
        concurrent(levels, args.rounds)
    notifications(args.notifications, args.repeat)
    return 0


def concurrent(levels: list[int], rounds: int) -> None:
    print(
        f"concurrent attempts (half demo, half flood {FLOOD_N}; agents sandboxed), "
        f"best of {rounds} rounds, each level in its own process:"
    )
    results = [run_level(k, rounds) for k in levels]
    base = results[0]
    print(
        f"  {'at once':>7}  {'attempts/min':>12}  {'round s':>8}  {'peak RSS MB':>11}  "
        f"{'MB per additional attempt':>25}  {'tree PSS MB':>11}  {'per additional':>14}  failed"
    )
    for r in results:
        more = r["level"] - base["level"]
        extra = (r["peak_rss_mb"] - base["peak_rss_mb"]) / more if more else float("nan")
        tree = (r["tree_pss_mb"] - base["tree_pss_mb"]) / more if more else float("nan")
        print(
            f"  {r['level']:>7}  {r['per_minute']:>12.0f}  {r['seconds']:>8.2f}  "
            f"{r['peak_rss_mb']:>11.1f}  {extra:>25.2f}  {r['tree_pss_mb']:>11.1f}  "
            f"{tree:>14.2f}  {r['failed']}"
        )
    print(
        "  (tree PSS: the governor, the agents, their sandboxes and the session sandboxes' "
        "fork servers, sampled every 0.2 s; informative, the target is the governor's own)"
    )
    worst = max(
        (
            (r["peak_rss_mb"] - base["peak_rss_mb"]) / (r["level"] - base["level"])
            for r in results
            if r["level"] > base["level"]
        ),
        default=0.0,
    )
    print(
        f"  target: peak RSS per additional attempt < 30 MB -> {'met' if worst < 30 else 'MISSED'} "
        f"(worst {worst:.2f} MB)"
    )


def notifications(n: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        gov = max(trio.run(governor_rate, n, Path(tmp)) for _ in range(repeat))
    bare = max(trio.run(bare_rate, n) for _ in range(repeat))
    fast = max(trio.run(bare_rate, n, orjson.loads) for _ in range(repeat))
    print(f"\nnotifications ({n:,} session/update lines, one attempt, best of {repeat}):")
    print(f"  bare loop (split + json.loads)     {bare:>12,.0f} /s")
    print(f"  bare loop (split + orjson.loads)   {fast:>12,.0f} /s")
    print(f"  governor (attempt, validated)      {gov:>12,.0f} /s")
    ratio = gov / bare
    print(
        f"  governor / bare json.loads = {ratio:.2f}; target >= 0.50 -> "
        f"{'met' if ratio >= 0.5 else 'MISSED'}"
    )
    print(
        f"  governor / bare orjson.loads = {gov / fast:.2f} (the governor parses with "
        "orjson: its own parser's floor)"
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
