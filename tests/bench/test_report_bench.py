"""bench/report.py runs at small sizes (so it cannot rot); its figures are
printed, never asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_report_bench_prints_memory_and_open_time_against_its_baselines() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "report.py"), "--small", "200", "--large", "3000",
         "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "peak RSS large/small" in done.stdout
    assert "report of 3,000 records" in done.stdout
    assert "until the screenshot is written" in done.stdout or "not installed" in done.stdout
