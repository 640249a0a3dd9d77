"""Where the log goes: ``--log FILE``, else a per-attempt file under
``$XDG_STATE_HOME/acp-governor/`` -- never inside a root the agent may write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from audit_helpers import demo_spec, records

from governor.attempt.lifecycle import run_attempt
from governor.job.spec import RefusedBeforeStart


@pytest.mark.parametrize(
    "where", ["ws/audit.jsonl", "ws/sub/dir/audit.jsonl", "extra/audit.jsonl", "link/audit.jsonl"]
)
async def test_a_log_inside_any_root_is_refused_before_anything_starts(
    tmp_path: Path, where: str
) -> None:
    (tmp_path / "extra").mkdir()
    (tmp_path / "ws").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "ws")  # a way into the workspace
    log = tmp_path / where
    with pytest.raises(RefusedBeforeStart) as e:
        await run_attempt(demo_spec(tmp_path, log, extra_dirs=[tmp_path / "extra"]))
    assert "is inside the root" in str(e.value) and "outside every root" in str(e.value)
    assert not log.exists()
    assert not (tmp_path / "ws" / "hello.py").exists()  # the agent never ran


async def test_a_log_next_to_the_workspace_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    log = tmp_path / "ws-audit.jsonl"  # a sibling whose name starts like the root
    outcome = await run_attempt(demo_spec(tmp_path, log))
    assert outcome.log == str(log)
    assert records(log)[0]["kind"] == "attempt-start"


async def test_without_log_the_attempt_writes_under_xdg_state_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    spec = demo_spec(tmp_path, tmp_path / "unused.jsonl")
    spec.log = None
    outcome = await run_attempt(spec)
    assert outcome.log is not None
    log = Path(outcome.log)
    assert log.parent == state / "acp-governor"
    assert records(log)[-1]["kind"] == "attempt-end"
    assert not any(p.suffix == ".jsonl" for p in (tmp_path / "ws").rglob("*"))


async def test_a_state_home_inside_the_workspace_is_refused_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ws").mkdir()
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "ws" / ".state"))
    spec = demo_spec(tmp_path, tmp_path / "unused.jsonl")
    spec.log = None
    with pytest.raises(RefusedBeforeStart, match="is inside the root"):
        await run_attempt(spec)
    assert not os.path.exists(tmp_path / "ws" / ".state" / "acp-governor")
