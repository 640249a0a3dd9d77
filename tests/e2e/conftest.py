"""Fixtures for the end-to-end tests against real ACP agents (see `npm_agents`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from npm_agents import Job


@pytest.fixture
def job(tmp_path: Path) -> Job:
    """Fresh folders for one attempt: workspace, HOME, audit log."""
    return Job.under(tmp_path)
