"""claude-agent-acp passing a job's HTTP MCP server on: the real
server-everything (streamableHttp, on loopback) reached by the governor behind
the same stdio shim, the loopback model stand-in scripted to call it."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp_relay.mcp_harness import everything_http
from npm_agents import CLAUDE_AGENT_ACP, Job, installed, records
from standin import StandIn, Step

from governor.attempt.lifecycle import run_attempt

pytestmark = [pytest.mark.e2e, pytest.mark.npm_agent(CLAUDE_AGENT_ACP)]

TOKEN = "everything-h3ader-v4lue"

POLICY = """
capability = "edit-workspace"

[[mcp.servers]]
name = "everything"
url = "{url}"
headers = {{ X-Relay-Test = "EVERYTHING_HEADER" }}

[mcp.allow]
tools = ["everything.echo"]

[mcp.deny]
tools = [{{ tool = "everything.echo", args = {{ message = "*forbidden*" }} }}]
"""


async def test_the_agents_call_to_an_http_server_goes_through_the_governor_decided_and_recorded(
    job: Job, tmp_path: Path
) -> None:
    with everything_http(tmp_path) as url:
        policy = job.root / "policy.toml"
        policy.write_text(POLICY.format(url=url))
        steps = [
            Step(("mcp__everything__echo",), {"message": "hello over http"}),
            Step(("mcp__everything__echo",), {"message": "a forbidden word"}),
        ]
        with StandIn(steps) as model:
            keywords = job.claude(model.url)
            keywords["environ"] = {**keywords["environ"], "EVERYTHING_HEADER": TOKEN}
            outcome = await run_attempt(job.spec(installed(CLAUDE_AGENT_ACP), policy=policy, **keywords))
            results = model.tool_results()
            described = model.describe()
    assert model.tool_uses() == ["mcp__everything__echo", "mcp__everything__echo"], described
    assert outcome.status == "completed", outcome.reason
    # the permission for each is decided by the [mcp] rules; the refused one never reaches the relay
    asked = [(r["subject"]["title"], r["verdict"]) for r in records(outcome, "permission")]
    assert asked == [("mcp__everything__echo", "allow"), ("mcp__everything__echo", "deny")], asked
    (call,) = records(outcome, "mcp")
    assert (call["subject"]["server"], call["subject"]["name"], call["verdict"]) == ("everything", "echo", "allow")
    texts = [str(r.get("content")) for r in results]
    assert any("Echo: hello over http" in t for t in texts), texts
    # the governor's connection to the named host: a network decision of the server's origin
    reached = [(r["subject"]["host"], r["verdict"]) for r in records(outcome, "network")
               if r["subject"].get("origin") == "mcp:everything"]  # fmt: skip
    assert reached == [("127.0.0.1", "allow")], reached  # one per session, its later connections under it
    # the header's value is in no record (the relay's tests show the agent is never given the URL)
    assert TOKEN not in job.log.read_text()
    assert outcome.acp is not None
    assert not [n for n in outcome.acp.notices if "MCP" in n], outcome.acp.notices
    job.verified_log()
