"""The report page of a long attempt: building it and opening it.

    python bench/report.py [--small 1000] [--large 1000000] [--rounds 3]

Two logs of one attempt each, written by the governor's own `AuditLog` (reads,
writes, commands and permissions, one refusal in fifty, one change without
asking in a hundred): ``--small`` and ``--large`` records.

- **Building** (`governor audit report LOG -o page.html`, each its own process):
  peak RSS (``ru_maxrss`` of that child) and wall time at both sizes. The log
  is read once, streaming (`governor.audit.page_source`): target large/small
  peak RSS <= 1.3 (memory flat in the log's size).
- **Opening** the large log's page in headless Chromium: the time from start
  until ``--screenshot`` has written its file and the browser has exited,
  against the page of an attempt with no decision (an empty log's page: the
  baseline, the browser's own start-up and drawing), rounds interleaved in the
  same run, median of ``--rounds``. Target: a page of a million records opens
  in seconds (issue 30): large - baseline < 5 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from governor.audit.log import AuditLog  # noqa: E402

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run")  # fmt: skip


def write_log(path: Path, n: int) -> None:
    """One attempt of ``n`` records (its start and end included)."""
    log = AuditLog(path, f"bench-{n}")
    log.record("attempt-start", agent="bench", workspace="/ws", prompt="a long attempt")
    for i in range(max(n - 2, 0)):
        if i % 100 == 99:
            log.record("unasked", subject={"tool_call": f"t{i}", "title": f"Edit f{i}",
                       "tool_kind": "edit", "paths": [f"/ws/src/f{i}.py"]},
                       verdict="reported", by="agent", reason="never came through the governor")  # fmt: skip
        elif i % 50 == 49:
            log.record("write", request=i, subject={"path": f"/ws/.git/hooks/h{i}", "bytes": 10},
                       verdict="deny", by="ceiling", rule="protected: .git/**",
                       reason=f"/ws/.git/hooks/h{i} is protected")  # fmt: skip
        elif i % 3 == 0:
            log.record("read", request=i, subject={"path": f"/ws/src/f{i}.py"}, verdict="allow",
                       by="policy", rule="capability: edit-workspace", reason="reads are allowed")  # fmt: skip
        else:
            log.record("terminal", request=i, subject={"command": f"pytest -k t{i}", "cwd": "/ws",
                       "argv": ["pytest", "-k", f"t{i}"]}, verdict="allow", by="policy",
                       rule="allow: pytest *", reason="the policy allows it")  # fmt: skip
    log.record("attempt-end", status="completed", duration_s=1.0, summary="done")
    log.close()


def build(log: Path, page: Path) -> tuple[float, float]:
    """(peak RSS in MB, wall seconds) of one ``governor audit report``."""
    argv = [sys.executable, "-m", "governor.cli", "audit", "report", str(log), "-o", str(page)]
    started = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        child = subprocess.Popen(argv, cwd=REPO, stdout=sink, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    assert child.stderr is not None
    err = child.stderr.read().decode()
    child.stderr.close()
    if status != 0:
        raise SystemExit(f"the report of {log} failed:\n{err[-2000:]}")
    return usage.ru_maxrss / 1024, wall


def opened(chromium: str, page: Path, scratch: Path) -> float:
    """Seconds from Chromium's start until its screenshot of ``page`` is written."""
    shot = scratch / "shot.png"
    shot.unlink(missing_ok=True)
    profile = scratch / "profile"
    shutil.rmtree(profile, ignore_errors=True)
    argv = [chromium, *FLAGS, f"--user-data-dir={profile}", "--window-size=1400,1800",
            f"--screenshot={shot}", page.resolve().as_uri()]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(argv, capture_output=True, timeout=600, check=True)
    took = time.perf_counter() - started
    if not shot.exists() or shot.stat().st_size == 0:
        raise SystemExit(f"chromium wrote no screenshot of {page}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    with tempfile.TemporaryDirectory(prefix="bench-report-", dir=os.environ.get("BENCH_DIR")) as d:
        scratch = Path(d)
        logs = {name: scratch / f"{name}.jsonl" for name in ("empty", "small", "large")}
        started = time.perf_counter()
        for name, n in (("empty", 2), ("small", args.small), ("large", args.large)):
            write_log(logs[name], n)
        print(f"logs written in {time.perf_counter() - started:.1f} s: "
              + ", ".join(f"{name} {logs[name].stat().st_size / 1e6:.1f} MB" for name in logs))  # fmt: skip
        pages = {name: scratch / f"{name}.html" for name in logs}
        built = {name: build(logs[name], pages[name]) for name in ("empty", "small", "large")}
        for name, n in (("small", args.small), ("large", args.large)):
            mb, s = built[name]
            print(f"report of {n:,} records: peak RSS {mb:.1f} MB, {s:.2f} s, "
                  f"page {pages[name].stat().st_size / 1e6:.2f} MB")  # fmt: skip
        ratio = built["large"][0] / built["small"][0]
        print(f"peak RSS large/small: {ratio:.2f} (target <= 1.3: "
              f"{'met' if ratio <= 1.3 else 'MISSED'})")  # fmt: skip
        if chromium is None:
            print("chromium is not installed: the open times are not measured")
            return
        times: dict[str, list[float]] = {"empty": [], "large": []}
        for _ in range(args.rounds):
            for name in times:
                times[name].append(opened(chromium, pages[name], scratch))
        base, large = statistics.median(times["empty"]), statistics.median(times["large"])
        print(f"chromium, until the screenshot is written (median of {args.rounds}): empty-log "
              f"page {base:.2f} s, {args.large:,}-record page {large:.2f} s: {large / base:.2f}x, "
              f"+{large - base:.2f} s (target < 5 s: {'met' if large - base < 5 else 'MISSED'})")  # fmt: skip


if __name__ == "__main__":
    main()
