"""bench/workspace.py runs (so it cannot rot); its figures are printed, never asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_workspace_bench_prints_each_snapshot_against_its_baseline() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "workspace.py"), "--files", "500", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "tree: 500 files" in done.stdout
    for row in ("baseline (size, mtime)", "snapshot at rest", "every file hashed"):
        assert row in done.stdout
