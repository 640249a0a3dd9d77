"""claude-agent-acp calling the governor's own tools (``[mcp] governor_tools``):
the loopback model stand-in scripted to call ``mcp__governor__write`` and
``mcp__governor__run``; each call decided and recorded as the write and the
command it is, carried out for real in the workspace and the sandbox."""

from __future__ import annotations

from typing import Any

import pytest
from npm_agents import CLAUDE_AGENT_ACP, Job, installed, records
from standin import StandIn, Step

from governor.attempt.agent_session import GOVERNOR_TOOLS_RULE
from governor.attempt.lifecycle import run_attempt
from governor.mcp.own_tools import INSTRUCTIONS

pytestmark = [pytest.mark.e2e, pytest.mark.npm_agent(CLAUDE_AGENT_ACP)]

def _by_request(found: list[dict[str, Any]], key: str = "title") -> dict[Any, tuple[str, str]]:
    """(subject[key], verdict) of each request, in order."""
    out: dict[Any, tuple[str, str]] = {}
    for r in found:
        before = out.get(r["request"])
        verdict = "deny" if before and before[1] == "deny" else r["verdict"]
        out[r["request"]] = (r["subject"][key], verdict)
    return out


POLICY = """
capability = "edit-workspace"

[deny]
commands = ["rm *"]
"""


async def test_the_agents_calls_to_the_governors_tools_are_decided_recorded_and_really_carried_out(
    job: Job,
) -> None:
    policy = job.root / "policy.toml"
    policy.write_text(POLICY)
    (job.workspace / "keep.txt").write_text("keep me\n")
    steps = [
        Step(("mcp__governor__write",), {"path": "made.txt", "content": "written through MCP\n"}),
        Step(("mcp__governor__run",), {"command": "cat made.txt; echo ran-in-the-sandbox"}),
        Step(("mcp__governor__run",), {"command": "echo by-a-command > ran.txt"}),
        Step(("mcp__governor__run",), {"command": "rm keep.txt"}),
    ]
    with StandIn(steps) as model:
        outcome = await run_attempt(
            job.spec(
                installed(CLAUDE_AGENT_ACP),
                policy=policy,
                append_rules=True,
                governor_tools=True,  # --governor-tools (the policy's [mcp] governor_tools is the other way)
                **job.claude(model.url),
            )
        )
        told = [s.text for s in model.served if s.tools]
        results = model.tool_results()
        described = model.describe()
    assert model.tool_uses() == [
        "mcp__governor__write", "mcp__governor__run", "mcp__governor__run", "mcp__governor__run"
    ], described
    assert outcome.status == "completed", outcome.reason
    # how the agent is told to use them: --append-rules adds a line to the prompt
    # (GOVERNOR_TOOLS_RULE), and Claude Code puts the server's instructions in
    # its system prompt
    assert GOVERNOR_TOOLS_RULE.strip() in told[0]
    assert INSTRUCTIONS in told[0]
    assert (job.workspace / "made.txt").read_text() == "written through MCP\n"
    assert (job.workspace / "ran.txt").read_text() == "by-a-command\n"
    assert (job.workspace / "keep.txt").exists()
    # Claude Code asks before an MCP tool: decided by what its input names (a
    # path to write, a command), as the call is when it reaches the governor.
    # (a command's parts are records of one request: refused when one part is)
    asked = list(_by_request(records(outcome, "permission")).values())
    assert asked == [
        ("mcp__governor__write", "allow"),
        ("mcp__governor__run", "allow"),
        ("mcp__governor__run", "allow"),
        ("mcp__governor__run", "deny"),
    ], asked
    # the two allowed calls reached the governor's server: the write and the
    # command, recorded as such, each saying it came through the MCP server
    (write,) = records(outcome, "write")
    assert write["subject"]["path"] == str(job.workspace / "made.txt")
    assert (write["subject"]["via"], write["verdict"]) == ("mcp:governor", "allow")
    commands = records(outcome, "terminal")
    assert {r["subject"]["via"] for r in commands} == {"mcp:governor"}
    assert list(_by_request(commands, "command").values()) == [
        ("cat made.txt; echo ran-in-the-sandbox", "allow"),
        ("echo by-a-command > ran.txt", "allow"),
    ]
    texts = [str(r.get("content")) for r in results]
    # Claude Code hands its model the structured result where there is one
    assert any(
        '"exit_code":0' in t and "written through MCP" in t and "ran-in-the-sandbox" in t
        for t in texts
    ), texts
    # the governed write and the governed command explain the new files: nothing was changed unasked
    assert records(outcome, "unasked") == []
    assert outcome.acp is not None
    kinds = ("permission", "write", "terminal", "network")
    assert outcome.acp.tally.asked == sum(len({r["request"] for r in records(outcome, k)}) for k in kinds)
    network_refused = [r for r in records(outcome, "network") if r["verdict"] == "deny"]
    assert outcome.acp.tally.refused == 1 + len(network_refused)
    job.verified_log()
