"""`bench/batch.py` runs end to end with a tiny N, so the bench cannot rot silently
(its figures are never asserted: tests do not time things)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "batch.py"


def test_the_batch_bench_runs_and_reports_every_level() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--jobs-count", "3", "--levels", "1,2", "--no-ray"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout[done.stdout.index("\n{") :])
    assert report["jobs"] == 3 and report["sequential"]["not_completed"] == 0
    assert report["local-1"]["completed"] == 3 and report["local-2"]["completed"] == 3
    assert "warning" not in done.stdout


def test_the_batch_bench_compares_jobs_with_checks_against_the_same_without() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--checks", "--jobs-count", "2", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout[done.stdout.index("\n{") :])
    checks = report["checks"]
    assert report["jobs"] == 2 and len(checks["walls"]["with"]) == len(checks["walls"]["without"]) == 1
    assert "warning" not in done.stdout  # every attempt completed, every check passed
