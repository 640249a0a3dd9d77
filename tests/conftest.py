"""Shared by every test folder: ``tests/`` itself is importable, for the few
helpers more than one folder needs (`toolchain_home`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.append(HERE)

# No test asserts a wall-clock time, Hypothesis's per-example deadline included:
# on a loaded machine an example of a real log and gate takes 10x its usual time.
settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")

SKIPPED_TO = "ACP_GOVERNOR_SKIPPED_TO"
"""CI's first run is the README's test command on a fresh clone with the dev
extra only, where a test needing an extra, an agent or Chromium skips; with this
variable naming a file, each skipped test's id is appended there, and CI runs
exactly those again with everything installed and ``CI`` set (where a missing
part fails instead of skipping). Nothing is written without it."""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Append a skipped test's id to the file `SKIPPED_TO` names (an xfail is no skip)."""
    target = os.environ.get(SKIPPED_TO)
    if target and report.skipped and not hasattr(report, "wasxfail"):
        with open(target, "a", encoding="utf-8") as ids:
            ids.write(report.nodeid + "\n")
