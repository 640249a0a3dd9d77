"""Fixtures for the end-to-end tests against real ACP agents (see `npm_agents`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from npm_agents import Job, installed


@pytest.fixture(autouse=True)
def _npm_agents_installed(request: pytest.FixtureRequest) -> None:
    """Skip (or fail under CI) a test marked ``npm_agent`` whose agent is missing,
    before it runs: a skip raised inside an async test loses its reason
    (pytest-trio reports a bare ``Skipped``), one raised here keeps it."""
    for mark in request.node.iter_markers("npm_agent"):
        installed(*mark.args, **mark.kwargs)


@pytest.fixture
def job(tmp_path: Path) -> Job:
    """Fresh folders for one attempt: workspace, HOME, audit log."""
    return Job.under(tmp_path)
