"""claude-agent-acp 0.23.1 (Claude Code 2.1.83 inside), driven by the loopback model stand-in.

It asks permission for Write, Edit and Bash, then does the work **itself** with
Claude Code's built-in tools: no ``fs/*`` and no ``terminal/*`` reach the
governor. Only the workspace diff reveals what it wrote, and only the agent
sandbox confines where it can write.
"""

from __future__ import annotations

import pytest
from npm_agents import CLAUDE_AGENT_ACP, Job, installed, records
from standin import OUTPUT_TOKENS, StandIn, bash, write

from governor.attempt import run_attempt

pytestmark = pytest.mark.e2e


async def test_a_write_it_does_itself_is_reported_unasked_and_one_outside_is_refused(
    job: Job,
) -> None:
    sibling = job.root / "sibling"
    sibling.mkdir()
    outside, inside = sibling / "outside.txt", job.workspace / "inside.txt"
    steps = [write(str(outside), "escaped\n"), write(str(inside), "written by the agent\n")]
    with StandIn(steps) as model:
        outcome = await run_attempt(job.spec(installed(CLAUDE_AGENT_ACP), **job.claude(model.url)))
    assert model.tool_uses() == ["Write", "Write"], model.describe()
    assert outcome.status == "completed", outcome.reason
    # Outside the workspace: refused at the permission request; it never happens.
    refused, allowed = records(outcome, "permission")
    assert (refused["subject"]["paths"], refused["verdict"]) == ([str(outside)], "deny")
    assert not outside.exists()
    # Inside: allowed, then written by the agent itself, with no fs/write_text_file.
    assert (allowed["subject"]["paths"], allowed["verdict"]) == ([str(inside)], "allow")
    assert inside.read_text() == "written by the agent\n"
    assert records(outcome, "write") == []
    (unasked,) = records(outcome, "unasked")
    assert unasked["subject"] == {"path": str(inside), "change": "created"}
    assert outcome.acp is not None
    assert outcome.acp.unasked_paths == [str(inside)]
    assert outcome.acp.decides_alone
    assert any("without asking" in n for n in outcome.acp.notices), outcome.acp.notices
    # The model's usage, as the stand-in reported it, reaches the outcome.
    assert outcome.usage is not None
    assert outcome.usage.get("outputTokens") == OUTPUT_TOKENS * model.turns(), outcome.usage
    job.verified_log()


@pytest.mark.parametrize("sandboxed", [True, False], ids=["agent-sandbox", "no-agent-sandbox"])
async def test_a_command_it_runs_itself_writes_outside_the_workspace_only_without_the_agent_sandbox(
    job: Job, sandboxed: bool
) -> None:
    # `touch` is allowed by the policy because commands run sandboxed; this
    # agent runs it itself, so only the agent sandbox stands in its way.
    sibling = job.root / "sibling"
    sibling.mkdir()
    outside, inside = sibling / "touched.txt", job.workspace / "touched.txt"
    steps = [bash(f"touch {outside}"), bash(f"touch {inside}")]
    with StandIn(steps) as model:
        spec = job.spec(
            installed(CLAUDE_AGENT_ACP), sandbox_agent=sandboxed, **job.claude(model.url)
        )
        outcome = await run_attempt(spec)
    assert model.tool_uses() == ["Bash", "Bash"], model.describe()
    assert [r["verdict"] for r in records(outcome, "permission")] == ["allow", "allow"]
    assert records(outcome, "terminal") == []  # it never used the client's terminals
    assert inside.exists()
    assert outside.exists() is not sandboxed
    assert outcome.acp is not None and outcome.acp.sandboxed_agent is sandboxed
    assert str(inside) in outcome.acp.unasked_paths
    unconfined = any("without the agent sandbox" in n for n in outcome.acp.notices)
    assert unconfined is not sandboxed, outcome.acp.notices


async def test_the_model_asked_for_is_the_one_the_model_api_sees(job: Job) -> None:
    steps = [write(str(job.workspace / "a.txt"), "a\n")]
    with StandIn(steps) as model:
        outcome = await run_attempt(
            job.spec(installed(CLAUDE_AGENT_ACP), model="haiku", **job.claude(model.url))
        )
    assert outcome.status == "completed", outcome.reason
    seen = model.models()
    assert seen and all(m is not None and "haiku" in m for m in seen), seen
    assert outcome.acp is not None and outcome.acp.model == "haiku"
    (config,) = records(outcome, "config")
    assert config["subject"] == {"option": "model", "value": "haiku"}
    assert config["verdict"] == "allow"
    assert "session/set_config_option" in config["reason"]
    job.verified_log()


async def test_without_a_model_asked_for_the_agents_default_is_left_alone(job: Job) -> None:
    with StandIn([]) as model:
        outcome = await run_attempt(job.spec(installed(CLAUDE_AGENT_ACP), **job.claude(model.url)))
    assert outcome.status == "completed", outcome.reason
    seen = model.models()
    assert seen and not any("haiku" in (m or "") for m in seen), seen
    assert records(outcome, "config") == []
    assert outcome.acp is not None and outcome.acp.model is None


async def test_a_model_the_agent_does_not_offer_ends_the_attempt_before_the_prompt(
    job: Job,
) -> None:
    with StandIn([]) as model:
        outcome = await run_attempt(
            job.spec(installed(CLAUDE_AGENT_ACP), model="gpt-5", **job.claude(model.url))
        )
    assert outcome.status == "failed"
    assert outcome.reason is not None
    assert "does not offer the model 'gpt-5'; it offers: default" in outcome.reason
    assert "haiku (Haiku)" in outcome.reason
    assert model.turns() == 0, model.describe()  # nothing was prompted
    (config,) = records(outcome, "config")
    assert config["verdict"] == "deny" and config["subject"]["value"] == "gpt-5"
    job.verified_log()
