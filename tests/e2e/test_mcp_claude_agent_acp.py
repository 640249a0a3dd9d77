"""claude-agent-acp passing a job's MCP server on: the real mcp-server-time
behind the governor's relay, the loopback model stand-in scripted to call it."""

from __future__ import annotations

import pytest
from mcp_relay.mcp_harness import python_server
from npm_agents import CLAUDE_AGENT_ACP, Job, installed, records
from standin import StandIn, Step

from governor.attempt.lifecycle import run_attempt
from governor.audit.tally import Tally, tally

pytestmark = [pytest.mark.e2e, pytest.mark.npm_agent(CLAUDE_AGENT_ACP)]

POLICY = """
capability = "edit-workspace"

[[mcp.servers]]
name = "time"
command = ["{time}", "--local-timezone", "UTC"]

[mcp.allow]
tools = ["time.get_current_time"]

[mcp.deny]
tools = [{{ tool = "time.convert_time", args = {{ target_timezone = "Europe/*" }} }}]
"""


async def test_the_agents_mcp_calls_reach_the_real_server_through_the_relay_each_decided_and_recorded(
    job: Job,
) -> None:
    policy = job.root / "policy.toml"
    policy.write_text(POLICY.format(time=python_server("mcp-server-time")))
    steps = [
        Step(("mcp__time__get_current_time",), {"timezone": "UTC"}),
        Step(
            ("mcp__time__convert_time",),
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"},
        ),
    ]
    with StandIn(steps) as model:
        outcome = await run_attempt(
            job.spec(installed(CLAUDE_AGENT_ACP), policy=policy, **job.claude(model.url))
        )
        results = model.tool_results()
        described = model.describe()
    assert model.tool_uses() == ["mcp__time__get_current_time", "mcp__time__convert_time"], described
    assert outcome.status == "completed", outcome.reason
    # Claude Code asks before each MCP tool: the permission is decided by the
    # same [mcp] rules; the refused one never reaches the relay.
    asked = [(r["subject"]["title"], r["verdict"], r["rule"]) for r in records(outcome, "permission")]
    assert asked == [
        ("mcp__time__get_current_time", "allow", "mcp.allow: time.get_current_time"),
        ("mcp__time__convert_time", "deny", "mcp.deny: time.convert_time (target_timezone=Europe/*)"),
    ], asked
    # The allowed one went through the relay to the real server, decided again there.
    (call,) = records(outcome, "mcp")
    assert (call["subject"]["server"], call["subject"]["name"], call["verdict"]) == (
        "time", "get_current_time", "allow"
    )
    assert call["subject"]["arguments"] == {"timezone": "UTC"}
    texts = [str(r.get("content")) for r in results]
    assert any('"timezone":"UTC"' in t and "datetime" in t for t in texts), texts
    # each counts as an ask in the tally, as the outcome's does
    assert tally([*records(outcome, "permission"), call]) == Tally(asked=3, allowed=2, refused=1)
    assert outcome.acp is not None
    kinds = ("permission", "mcp", "network")
    assert outcome.acp.tally.asked == sum(len(records(outcome, k)) for k in kinds)
    job.verified_log()
