"""Fixtures for the sandbox tests: a scratch workspace and a fake home."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_procs import processes_matching

from governor.policies.capability import Capability
from governor.sandbox.plan.profile import Profile


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    (path / ".ssh").mkdir()
    (path / ".ssh" / "id_ed25519").write_text("PRIVATE-KEY-CANARY")
    return path


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@pytest.fixture
def edit(ws: Path, home: Path) -> Profile:
    return Profile(capability=Capability.EDIT_WORKSPACE, workspace=ws, home=home)


@pytest.fixture
def no_leftovers() -> Iterator[list[str]]:
    """Markers registered here must match no process when the test ends."""
    markers: list[str] = []
    yield markers
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        alive = [pid for m in markers for pid in processes_matching(m)]
        if not alive:
            return
        time.sleep(0.02)
    for pid in alive:
        os.kill(pid, 9)
    raise AssertionError(f"processes outlived their command: {alive}")
