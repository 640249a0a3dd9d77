"""Shared by every test folder: ``tests/`` itself is importable, for the few
helpers more than one folder needs (`toolchain_home`)."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import settings

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.append(HERE)

# No test asserts a wall-clock time, Hypothesis's per-example deadline included:
# on a loaded machine an example of a real log and gate takes 10x its usual time.
settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")
