"""What a job's checks come to is read without their runner: the values
(`governor.checks.check_values`) import nothing of ours at run time, so the
ending, the outcome and a reader of an outcome load no sandbox runner and no
planter of canaries to read a check's end. Before, `CheckRun` and `Checks` lived
in the runner, and the runner hid its sandbox imports inside functions."""

from __future__ import annotations

import subprocess
import sys

RUNNERS = ("governor.checks.check_runs", "governor.checks.canaries", "governor.sandbox.run")


def _loaded_by(module: str) -> list[str]:
    """The modules of ours a fresh interpreter holds after importing `module`."""
    done = subprocess.run(
        [sys.executable, "-c",
         f"import sys, {module}; print('\\n'.join(m for m in sys.modules if m.startswith('governor')))"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout.split()


def test_the_ending_and_the_outcome_read_a_checks_end_without_loading_a_runner() -> None:
    for module in ("governor.ending.how_it_ended", "governor.ending.outcome"):
        loaded = _loaded_by(module)
        ran = [m for m in loaded if m.startswith(RUNNERS)]
        assert not ran, f"{module} loads {ran}"
        assert "governor.checks.check_values" in loaded, module  # the neighbour: the values are there


def test_the_check_values_import_nothing_of_ours_at_run_time() -> None:
    loaded = set(_loaded_by("governor.checks.check_values"))
    face = {"governor", "governor.version"}  # the package's own face, loaded by any import
    assert loaded - face == {"governor.checks", "governor.checks.check_values"}
