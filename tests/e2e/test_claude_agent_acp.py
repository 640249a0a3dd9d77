"""claude-agent-acp 0.23.1 (Claude Code 2.1.83 inside), driven by the loopback model stand-in.

It asks permission for Write, Edit and Bash, then does the work **itself** with
Claude Code's built-in tools: no ``fs/*`` and no ``terminal/*`` reach the
governor. Only the workspace diff reveals what it wrote, and only the agent
sandbox confines where it can write.
"""

from __future__ import annotations

import pytest
from npm_agents import CLAUDE_AGENT_ACP, Job, installed, preset_path, records
from standin import OUTPUT_TOKENS, StandIn, bash, write
from toolchain_home import (
    AVAILABLE,
    COMMIT,
    PROBE,
    WHY_NOT,
    check_probe_and_commit,
    developer_workspace,
)

from governor.attempt.lifecycle import run_attempt
from governor.audit.reading import decision_records

pytestmark = [pytest.mark.e2e, pytest.mark.npm_agent(CLAUDE_AGENT_ACP)]


async def test_a_write_it_does_itself_is_explained_by_its_allowed_permission_and_one_outside_is_refused(
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
    # Inside: allowed, then written by the agent itself, with no fs/write_text_file:
    # the change is the allowed permission's, not unasked.
    assert (allowed["subject"]["paths"], allowed["verdict"]) == ([str(inside)], "allow")
    assert inside.read_text() == "written by the agent\n"
    assert records(outcome, "write") == []
    (changed,) = records(outcome, "changed")
    assert changed["subject"] == {"path": str(inside), "change": "created"}
    assert changed["explained_by"] == {
        "rule": "named",
        "tool_call": allowed["subject"]["tool_call"],
        "seq": allowed["seq"],
    }
    assert records(outcome, "unasked") == []
    assert outcome.acp is not None
    assert outcome.acp.unasked == 0 and outcome.acp.unasked_paths == []
    assert not outcome.acp.decides_alone  # its mode (default) asks, and it did
    # The model's usage, as the stand-in reported it, reaches the outcome.
    assert outcome.usage is not None
    assert outcome.usage.get("outputTokens") == OUTPUT_TOKENS * model.turns(), outcome.usage
    job.verified_log()


async def test_write_and_bash_all_asked_and_allowed_end_with_nothing_unasked(job: Job) -> None:
    made = job.workspace / "made.txt"
    steps = [
        write(str(job.workspace / "notes.md"), "# notes\n"),
        bash(f"echo built > {made} && touch {job.workspace / 'stamp'}"),
    ]
    with StandIn(steps) as model:
        outcome = await run_attempt(job.spec(installed(CLAUDE_AGENT_ACP), **job.claude(model.url)))
    assert model.tool_uses() == ["Write", "Bash"], model.describe()
    assert outcome.status == "completed", outcome.reason
    assert made.read_text() == "built\n" and (job.workspace / "stamp").exists()
    assert {r["verdict"] for r in records(outcome, "permission")} == {"allow"}
    assert outcome.acp is not None
    assert outcome.acp.tally.unasked == 0, list(decision_records(outcome.log, outcome.run_id))
    rules = {
        r["subject"]["path"].rsplit("/", 1)[-1]: r["explained_by"]["rule"]
        for r in records(outcome, "changed")
    }
    # named: the Write's location and the redirect target; the window: `touch stamp`
    assert rules == {"notes.md": "named", "made.txt": "named", "stamp": "window"}, rules
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
    # It asked and was allowed: what it then did itself is explained by that permission.
    assert str(inside) not in outcome.acp.unasked_paths
    assert str(inside) in [r["subject"]["path"] for r in records(outcome, "changed")]
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


@pytest.mark.skipif(not AVAILABLE, reason=WHY_NOT)
async def test_the_persons_toolchain_in_home_runs_in_its_own_bash_and_secrets_stay_hidden(
    job: Job,
) -> None:
    # its own Bash, inside the agent's sandbox; HOME is the job's, not the
    # password database's (as in a CI container)
    canary = "CANARY-toolchain-agent"
    toolchain = developer_workspace(job.home, job.workspace, canary)
    with StandIn([bash(f"{PROBE}; {COMMIT}")]) as model:
        kw = job.claude(model.url)
        kw["environ"]["PATH"] = f"{toolchain.path}:{kw['environ']['PATH']}"
        outcome = await run_attempt(job.spec(installed(CLAUDE_AGENT_ACP), **kw))
    assert model.tool_uses() == ["Bash"], model.describe()
    assert outcome.status == "completed", outcome.reason
    assert outcome.acp is not None and outcome.acp.sandboxed_agent
    assert records(outcome, "terminal") == []  # not through the governor's terminals
    (result,) = model.tool_results()
    text = str(result["content"])
    check_probe_and_commit(text, toolchain, canary, job.workspace)


async def test_with_home_not_the_password_databases_it_finds_its_settings_there(job: Job) -> None:
    # HOME is the job's folder (as CI containers set it), not the password
    # database's: the preset's ~/.claude must be kept from where the agent looks.
    claude = job.home / ".claude"
    claude.mkdir()
    (claude / "settings.json").write_text('{"model": "model-from-home-settings"}')

    async def models_seen() -> list[str | None]:
        with StandIn([]) as model:
            kw = job.claude(model.url)
            kw["environ"]["PATH"] = preset_path(kw["environ"], "claude-agent-acp")
            outcome = await run_attempt(job.spec(None, agent="claude", **kw))
        assert outcome.status == "completed", outcome.reason
        assert outcome.acp is not None and outcome.acp.sandboxed_agent
        return model.models()

    seen = await models_seen()
    assert seen and set(seen) == {"model-from-home-settings"}, seen
    (claude / "settings.json").write_text("{}")
    seen = await models_seen()
    assert seen and "model-from-home-settings" not in seen  # the neighbour: it was the file
