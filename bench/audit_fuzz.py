"""The long fuzz run of the audit readers: crafted log lines and batch outcome lines
through every reader (`tests/audit/test_audit_fuzz.py` runs a few hundred in CI).

    python bench/audit_fuzz.py [--lines 1000000] [--seed S] [--per-log 12]

Each log is a seeded handful of hostile lines (`log_fuzz`), read by the table,
``--json``, ``--refused``, ``--network``, ``--attempt``, ``verify``, ``report``
and ``replay``; every fifth a batch's output too (its outcome lines read by the
batch table and ``verify --outcomes``). Printed: the lines fed, the throughput,
and each crash with the seed that replays it (exit status 1 if there is any).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
AUDIT_TESTS = HERE.parent / "tests" / "audit"
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path[:0] = [str(HERE.parent), str(AUDIT_TESTS)]

from log_fuzz import write_batch, write_log  # noqa: E402
from reader_runs import batch_views, crashes, views  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000, help="log and outcome lines to feed")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--per-log", type=int, default=12, help="lines per log at most")
    args = parser.parse_args()
    base = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"seed {base} (replay with --seed {base})")
    fed = logs = 0
    found: list[str] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-audit-fuzz-") as tmp_name:
        tmp = Path(tmp_name)
        policy = tmp / "policy.toml"
        policy.write_text('capability = "edit-workspace"\n', encoding="utf-8")
        while fed < args.lines:
            seed = base + logs
            rng = random.Random(seed)
            records = rng.randrange(1, args.per_log + 1)
            write_log(tmp / "audit.jsonl", rng, records)
            fed += records
            found += [f"seed {seed}: {c}" for c in crashes(views(tmp / "audit.jsonl", policy, tmp / "p.html"))]
            if logs % 5 == 0:
                write_batch(tmp / f"out{logs}", rng, jobs=2, records=3)
                fed += 2 * 3 + 2
                found += [f"seed {seed}: {c}" for c in crashes(batch_views(tmp / f"out{logs}"))]
            logs += 1
            if logs % 2000 == 0:
                print(f"  {fed:,} lines, {len(found)} crash(es)", flush=True)
    elapsed = time.perf_counter() - started
    print(f"{fed:,} lines in {logs:,} logs, {elapsed:.0f} s ({fed / elapsed:,.0f} lines/s): "
          f"{len(found)} crash(es)")  # fmt: skip
    for crash in found[:20]:
        print(crash)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
