"""claude-agent-acp paused on an ``ask`` and resumed through its own session (issue 38).

It advertises ``loadSession`` and ``sessionCapabilities.resume``: the attempt's
second part resumes its session (no replay), tells it the person's decision,
and the model stand-in sees the first part's messages in the resumed request.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from npm_agents import CLAUDE_AGENT_ACP, Job, preset_path
from standin import StandIn, write

from governor.attempt import paused
from governor.attempt.lifecycle import run_attempt

pytestmark = [pytest.mark.e2e, pytest.mark.npm_agent(CLAUDE_AGENT_ACP)]


async def test_approved_and_resumed_its_own_session_goes_on_the_write_lands_one_attempt_one_chain(
    job: Job, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    policy = tmp_path / "ask.toml"
    policy.write_text('capability = "edit-workspace"\n[ask]\ntools = ["edit"]\n')
    inside = job.workspace / "inside.txt"
    steps = [write(str(inside), "written after the approval\n")] * 2
    with StandIn(steps) as model:
        claude = job.claude(model.url)
        # the preset keeps ~/.claude (its sessions) writable on the job's own $HOME
        claude["environ"]["PATH"] = preset_path(claude["environ"], "claude-agent-acp")
        spec = job.spec(None, agent="claude", policy=str(policy), approver="pause", **claude)
        first = await run_attempt(spec)
        assert first.status == "needs_approval", (first.reason, model.describe())
        assert not inside.exists()
        state = paused.PausedState.load(first.run_id)
        assert state.session["id"] and state.session["resume"] and state.session["load"]
        paused.approve(Path(job.log), None, "once", "tester", 0)
        going_on = paused.continuation(Path(job.log))
        prepared = paused.prepared_again(going_on, environ=claude["environ"])
        second = await run_attempt(prepared, continues=going_on)
        told = model.served[-1].text if model.served else ""
    assert second.status == "completed", (second.reason, second.acp and second.acp.notices, model.describe())
    assert second.run_id == first.run_id
    assert inside.read_text() == "written after the approval\n"
    assert second.acp is not None
    assert any("session resumed (session/resume)" in n for n in second.acp.notices), second.acp.notices
    # The model saw the first part's request and the person's decision in one conversation.
    assert "Do the task." in told and "A person approved your request" in told, told
    records = job.verified_log()
    assert {r["attempt"] for r in records} == {first.run_id}
    allowed = [r for r in records if r["kind"] == "permission" and r.get("by") == "person"]
    assert allowed and allowed[0]["verdict"] == "allow"
