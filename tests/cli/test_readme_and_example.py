"""The README's promises and the worked example, run for real as a newcomer would."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOVERNOR = Path(sys.executable).parent / "governor"


def readme_commands() -> list[str]:
    block = re.search(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block is not None, "the README must open with a sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_opens_with_the_two_commands() -> None:
    first, second = readme_commands()
    assert "pip install" in first and "governor run --agent demo" in first
    assert "[dev]" not in first  # the demo needs none of the developers' tools
    assert "--policy edit-workspace " in first  # a shipped policy by name: any folder
    assert second == ".venv/bin/pip install -q -e '.[dev]' && .venv/bin/python -m pytest -q"


def test_the_readme_is_short_enough_to_read() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def test_the_readmes_demo_run_completes_with_a_refusal_and_an_unasked_change(
    tmp_path: Path,
) -> None:
    first = readme_commands()[0]
    demo = first.split("&& .venv/bin/governor ", 1)[1].replace('"$(mktemp -d)"', str(tmp_path))
    args = re.findall(r'"[^"]*"|\S+', demo)
    args = [a.strip('"') for a in args]
    done = subprocess.run(
        [str(GOVERNOR), *args, "--json", "--log", str(tmp_path.parent / "demo.jsonl")],
        cwd=tmp_path.parent,  # not the checkout: the policy is found by its name
        capture_output=True,
        text=True,
        timeout=120,
    )
    import json

    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    tally = outcome["acp"]["tally"]
    assert outcome["status"] == "completed"
    assert tally["refused"] >= 1 and tally["unasked"] >= 1


def test_the_worked_loop_example_finishes_the_task(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "loop.py"), "--workspace", str(tmp_path / "ws")],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "XDG_STATE_HOME": str(tmp_path / "state"),
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "task done: hello from the demo agent" in done.stdout


def test_the_library_page_opens_with_the_first_loop_example_word_for_word() -> None:
    """docs/library.md shows examples/first_loop.py, which CI type-checks with
    ``mypy --strict`` and this file runs: the page's loop cannot drift from one
    that a type checker accepts and that works."""
    page = (ROOT / "docs" / "library.md").read_text()
    block = re.search(r"```python\n(.*?)```", page, re.S)
    assert block is not None
    assert block.group(1) == (ROOT / "examples" / "first_loop.py").read_text()


def test_the_first_loop_example_stops_at_a_passed_verdict(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "first_loop.py"), str(tmp_path / "ws")],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "s")},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0].startswith("completed passed Tally(asked=6"), done.stdout
    assert done.stdout.splitlines()[-1] == "done"
