"""examples/tries.py runs as documented: a loop of its own over the library's
three steps (attempt, checks, digest), the real learner agent over real pipes,
its checks in real bwrap. The agent's first fix is wrong; told the digest, its
second is right."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tries.py"


def _run(tmp_path: Path, *more: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    argv = [sys.executable, str(EXAMPLE), "--workspace", str(tmp_path / "ws"), *more]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)


def test_the_tries_example_passes_on_the_second_try_told_the_digest(tmp_path: Path) -> None:
    done = _run(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    first, second = done.stdout.splitlines()
    assert first.startswith("try 1: completed (fixed add), checks failed")
    assert second.startswith("try 2: completed (fixed add, from the checks' digest), checks passed")
    assert (tmp_path / "ws" / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    # two logs, the starting copy gone
    assert len(list((tmp_path / "state" / "acp-governor").glob("*.jsonl"))) == 2
    # the starting copy lived with the attempt's own files (hidden from every sandbox)
    attempts = tmp_path / "state" / "acp-governor" / "attempts"
    assert not [p for p in attempts.iterdir() if p.name.startswith("tries-")]


def test_the_tries_example_gives_up_when_its_one_try_fails(tmp_path: Path) -> None:
    done = _run(tmp_path, "--tries", "1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "giving up after 1 tries"
    # the workspace holds the last try's work
    assert (tmp_path / "ws" / "calc.py").read_text() == "def add(a, b):\n    return a * b\n"
