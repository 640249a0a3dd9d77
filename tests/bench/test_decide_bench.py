"""bench/decide.py runs (so it cannot rot); its figures are printed, never asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_decide_bench_prints_every_corpus_against_its_baseline() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "decide.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "policy: 50 rules" in done.stdout
    for corpus in ("paths", "tool kinds", "parse cache cold", "parse cache warm"):
        assert corpus in done.stdout
