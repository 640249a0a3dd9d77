"""Fixtures of the robustness tests (the helpers are in `robustness_helpers`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from robustness_helpers import kill_marked, new_marker


@pytest.fixture
def marker() -> Iterator[str]:
    """A fresh marker for the agent's argv; whatever still carries it is killed after."""
    value = new_marker()
    yield value
    kill_marked(value)
