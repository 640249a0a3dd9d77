"""An attempt's memory against its length: peak RSS of ``governor run`` with the
flood agent at 2,000 decisions and at 120,000, in one run.

    python bench/memory.py [--small 1000] [--large 60000] [--json]

The flood agent (`bench/flood_agent.py`) makes 2N requests (N permissions, N
reads), so N = 1,000 and 60,000 are 2,000 and 120,000 decisions. Each run is
its own ``governor run`` process (agent sandboxed, audit log to a file, the
human summary on stdout); its peak RSS is ``ru_maxrss`` of that child. Target:
large/small <= 1.3, with ``--json`` too: the outcome printed holds the whole
decision log, streamed from the file one record at a time
(`governor.cli.outcome_json`), so printing it must not grow with the attempt.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def peak(n: int, scratch: Path, as_json: bool) -> tuple[float, float]:
    """(peak RSS in MB, wall seconds) of one ``governor run`` at ``n``."""
    workspace, log = scratch / "ws", scratch / f"audit-{n}.jsonl"
    argv = [
        sys.executable, "-m", "governor.cli", "run", "--capability", "edit-workspace",
        "--workspace", str(workspace), "--log", str(log), *(["--json"] if as_json else []),
        "go", "--", sys.executable, str(HERE / "flood_agent.py"), str(n),
    ]  # fmt: skip
    out = scratch / "out.txt"
    started = time.perf_counter()
    with out.open("wb") as sink:
        pid = subprocess.Popen(argv, cwd=REPO, stdout=sink, stderr=subprocess.STDOUT).pid
        _, status, usage = os.wait4(pid, 0)  # its own rusage: ru_maxrss is its peak
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"governor run at N={n} failed:\n{out.read_text()[-2000:]}")
    log.unlink()
    return usage.ru_maxrss / 1024, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=60000)
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        scratch = Path(tmp)
        (scratch / "ws").mkdir()
        (scratch / "ws" / "flood-read.txt").write_text("flood\n")
        small_mb, small_s = peak(args.small, scratch, args.json)
        large_mb, large_s = peak(args.large, scratch, args.json)
    print(f"load {os.getloadavg()[0]:.1f}; --json {'on' if args.json else 'off'}")
    print(f"{2 * args.small:>8} decisions: peak RSS {small_mb:7.1f} MB  ({small_s:.1f} s)")
    print(f"{2 * args.large:>8} decisions: peak RSS {large_mb:7.1f} MB  ({large_s:.1f} s)")
    ratio = large_mb / small_mb
    verdict = "met" if ratio <= 1.3 else "NOT met"
    print(f"large/small = {ratio:.2f}; target <= 1.3: {verdict}")


if __name__ == "__main__":
    main()
