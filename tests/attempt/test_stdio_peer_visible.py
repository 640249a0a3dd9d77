"""A sandboxed stdlib agent sees the JSON-RPC loop it imports by path
(`governor.agents.stdio_peer`, kept visible by `governor.confine.sandboxes`), even when
the agent itself lies under a folder its sandbox hides (here ``/tmp``, as a
checkout under ``$HOME`` would be): a real demo agent, real bwrap."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from governor.attempt.lifecycle import run_attempt
from governor.confine import sandboxes as confine
from governor.job.spec import AttemptSpec
from governor.policies.policy import parse_policy

AGENTS = Path(__file__).resolve().parents[2] / "governor" / "agents"
EDIT = parse_policy('capability = "edit-workspace"', "test")


async def demo_copy_attempt(tmp_path: Path) -> tuple[str, str]:
    """The demo agent and its loop copied under ``tmp_path`` (hidden in the
    sandbox), run sandboxed for one step: the outcome's status and summary."""
    copy = tmp_path / "agents"
    copy.mkdir()
    for name in ("demo.py", "stdio_peer.py"):
        shutil.copy(AGENTS / name, copy / name)
    ws = tmp_path / "ws"
    ws.mkdir()
    outcome = await run_attempt(
        AttemptSpec(
            prompt="make a hello program",
            argv=[sys.executable, str(copy / "demo.py"), "--steps", "1"],
            workspace=ws,
            policy=EDIT,
            log=tmp_path / "audit.jsonl",
            timeout=60,
            sandbox_agent=True,
        )
    )
    return outcome.status, outcome.summary or outcome.reason or ""


async def test_an_agent_under_a_hidden_folder_imports_the_loop_kept_visible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confine, "AGENT_PEER", tmp_path / "agents" / "stdio_peer.py")
    status, summary = await demo_copy_attempt(tmp_path)
    assert status == "completed", summary
    assert "wrote hello.py" in summary
    assert (tmp_path / "ws" / "hello.py").is_file()


async def test_the_same_agent_without_its_loop_kept_visible_cannot_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confine, "AGENT_PEER", AGENTS / "stdio_peer.py")  # not the copy's
    status, summary = await demo_copy_attempt(tmp_path)
    assert status != "completed"
    assert "stdio_peer" in summary, summary  # the agent's last words name what it missed
    assert not (tmp_path / "ws" / "hello.py").exists()
