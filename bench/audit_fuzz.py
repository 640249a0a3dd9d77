"""The long fuzz run of the audit readers: crafted log lines and batch outcome lines
through every reader (`tests/audit/test_audit_fuzz.py` runs a few hundred in CI).

    python bench/audit_fuzz.py [--lines 1000000] [--seed S] [--per-log 12] [--workers 2]
                               [--cli-every 100] [--script-every 5000]

Each log is a seeded handful of hostile lines (`log_fuzz`), read by the table,
``--json``, ``--refused``, ``--network``, ``--attempt``, ``verify``, ``report``
and ``replay``; every fifth a batch's output too (its outcome lines read by the
batch table and ``verify --outcomes``). The readers run in this process,
called directly (`reader_runs.readers`: argparse set up and run for each would
cost more than most logs' reading); every ``--cli-every``-th log goes through
the command line's own parser as well (`reader_runs.views`), and every
``--script-every``-th through the installed console script, a process of its
own. Logs are written under /dev/shm when there is one. The policy replay
reads is parsed once per worker (each reader would parse the same file anew:
the policy's patterns are compiled at every parse).

Printed: the lines fed, the throughput, and each crash with the seed that
replays it (exit status 1 if there is any).
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
AUDIT_TESTS = HERE.parent / "tests" / "audit"
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path[:0] = [str(HERE.parent), str(AUDIT_TESTS)]

from log_fuzz import write_batch, write_log  # noqa: E402
from reader_runs import batch_readers, batch_views, crashes, reader_crashes, readers, views  # noqa: E402

GOVERNOR = Path(sys.executable).with_name("governor")


def script_crashes(log: Path, page: Path) -> list[str]:
    """The console script on one log: a traceback or an exit outside 0-2 is a crash."""
    found = []
    for argv in (["audit", str(log)], ["audit", "verify", str(log)],
                 ["audit", "report", str(log), "--attempt", "a1", "-o", str(page)]):  # fmt: skip
        done = subprocess.run([str(GOVERNOR), *argv], capture_output=True, text=True, timeout=300)
        if done.returncode not in (0, 1, 2) or "Traceback" in done.stderr:
            found.append(f"{argv}: exit {done.returncode}: {done.stderr[-500:]}")
    return found


def work(task: tuple[int, int, int, int, int, int, int]) -> tuple[int, int, int, list[str]]:
    """One worker's share: logs ``first, first + step, ...`` while under ``lines``
    lines. Returns (lines fed, logs, CLI samples, crashes)."""
    import governor.job.ceiling_source
    import governor.job.policy_files

    governor.job.policy_files.read_policy = functools.cache(governor.job.policy_files.read_policy)
    governor.job.ceiling_source.load_ceiling = functools.cache(governor.job.ceiling_source.load_ceiling)
    base, first, step, lines, per_log, cli_every, script_every = task
    shm = Path("/dev/shm")
    fed = logs = sampled = 0
    found: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-audit-fuzz-", dir=shm if shm.is_dir() else None) as d:
        tmp = Path(d)
        policy = tmp / "policy.toml"
        policy.write_text('capability = "edit-workspace"\n', encoding="utf-8")
        log, page = tmp / "audit.jsonl", tmp / "p.html"
        k = first
        while fed < lines:
            seed = base + k
            rng = random.Random(seed)
            records = rng.randrange(1, per_log + 1)
            write_log(log, rng, records)
            fed += records
            found += [f"seed {seed}: {c}" for c in reader_crashes(readers(log, policy, page))]
            if k % cli_every == 0:
                sampled += 1
                found += [f"seed {seed} (command line): {c}" for c in crashes(views(log, policy, page))]
            if k % script_every == 0:
                found += [f"seed {seed} (console script): {c}" for c in script_crashes(log, page)]
            if k % 5 == 0:
                out = tmp / f"out{k}"
                write_batch(out, rng, jobs=2, records=3)
                fed += 2 * 3 + 2
                found += [f"seed {seed}: {c}" for c in reader_crashes(batch_readers(out))]
                if k % cli_every == 0:
                    found += [f"seed {seed} (command line): {c}" for c in crashes(batch_views(out))]
            logs += 1
            k += step
            if first == 0 and logs % 2000 == 0:
                print(f"  worker 0: {fed:,} lines, {len(found)} crash(es)", flush=True)
    return fed, logs, sampled, found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000, help="log and outcome lines to feed")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--per-log", type=int, default=12, help="lines per log at most")
    parser.add_argument("--workers", type=int, default=2, help="processes, each its share of the logs")
    parser.add_argument("--cli-every", type=int, default=100, help="every Nth log through the parser too")
    parser.add_argument("--script-every", type=int, default=5000, help="every Nth through the console script")
    args = parser.parse_args()
    base = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"seed {base} (replay with --seed {base}), {args.workers} worker(s)", flush=True)
    share = -(-args.lines // args.workers)
    tasks = [(base, w, args.workers, share, args.per_log, args.cli_every, args.script_every)
             for w in range(args.workers)]  # fmt: skip
    started = time.perf_counter()
    if args.workers == 1:
        results = [work(tasks[0])]
    else:
        with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
            results = pool.map(work, tasks)
    elapsed = time.perf_counter() - started
    fed = sum(r[0] for r in results)
    logs = sum(r[1] for r in results)
    sampled = sum(r[2] for r in results)
    found = [c for r in results for c in r[3]]
    print(f"{fed:,} lines in {logs:,} logs ({sampled:,} of them through the command line's parser too), "
          f"{elapsed:.0f} s ({fed / elapsed:,.0f} lines/s, load average {os.getloadavg()[0]:.1f}): "
          f"{len(found)} crash(es)")  # fmt: skip
    for crash in found[:20]:
        print(crash)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
