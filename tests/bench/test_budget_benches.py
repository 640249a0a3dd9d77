"""bench/roots_size.py and bench/kernel_held.py run (so they cannot rot); their
figures are printed, never asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_walk_bench_prints_the_blocks_walk_against_the_apparent_sizes() -> None:
    out = run("roots_size.py", "--files", "500", "--rounds", "1", "--holders", "2")
    assert "tree: 500 files" in out
    for row in ("baseline (apparent sizes)", "blocks of every entry", "2 holders' descriptors"):
        assert row in out


def test_the_kernel_memory_bench_prints_the_namespaces_reading_against_the_measure() -> None:
    out = run("kernel_held.py", "--sandboxes", "1", "--rounds", "1")
    assert "1 sandboxes" in out
    for row in ("measure without the kernel's part", "with held_in_kernel"):
        assert row in out
