"""claude-agent-acp 0.23.1 under budgets, its model the loopback stand-in.

The stand-in reports 50,000 output tokens an answer; Claude Code reckons their
cost itself and the adapter sends it as ``usage_update`` ``cost`` (with the
prompt answer's ``usage``) once, when its turn's result comes, never in the
middle of a turn. So a ``cost_usd`` limit it passes ends the attempt
``failed`` naming the limit as the turn ends (its writes made by then), while
the same run under a limit it stays within completes; a ``tool_calls`` limit
stops it in the middle of its turn, its next Write refused and never made.
"""

from __future__ import annotations

import re

import pytest
from npm_agents import CLAUDE_AGENT_ACP, Job, installed, records
from standin import StandIn, write

from governor.attempt.lifecycle import run_attempt
from governor.audit.reading import decision_records
from governor.cli import exit_code
from governor.ending.outcome import Outcome
from governor.policies.policy import Policy, parse_policy

pytestmark = [pytest.mark.e2e, pytest.mark.npm_agent(CLAUDE_AGENT_ACP)]

EXPENSIVE = 50_000
"""Output tokens each stand-in answer reports: dollars' worth at any model's price."""


def _policy(limits: str) -> Policy:
    return parse_policy(f'capability = "edit-workspace"\n[limits]\n{limits}\n', "job.toml")


async def _two_writes(job: Job, limits: str) -> Outcome:
    steps = [write(str(job.workspace / "a.txt"), "a\n"), write(str(job.workspace / "b.txt"), "b\n")]
    with StandIn(steps, output_tokens=EXPENSIVE) as model:
        spec = job.spec(installed(CLAUDE_AGENT_ACP), policy=_policy(limits), **job.claude(model.url))
        outcome = await run_attempt(spec)
    assert model.tool_uses() == ["Write", "Write"], model.describe()
    return outcome


async def test_the_cost_it_reports_past_cost_usd_ends_the_attempt_failed_naming_the_limit(
    job: Job,
) -> None:
    outcome = await _two_writes(job, "cost_usd = 1")
    assert outcome.status == "failed" and exit_code(outcome) == 1
    assert outcome.reason is not None
    found = re.fullmatch(
        r"Claude Agent was stopped at its cost_usd limit 1 USD \(\[limits\] cost_usd: "
        r"([0-9.]+) USD reported\)",
        outcome.reason,
    )
    assert found is not None, outcome.reason
    assert outcome.usage is not None
    cost = outcome.usage["cost"]
    assert cost["currency"] == "USD" and cost["amount"] > 1
    assert float(found.group(1)) == pytest.approx(cost["amount"], rel=1e-5)
    assert outcome.usage["reported"] is True and outcome.usage["tool_calls"] == 2
    assert outcome.usage["outputTokens"] >= 2 * EXPENSIVE  # the stand-in's, as it passed them on
    (stop,) = [r for r in decision_records(outcome.log, outcome.run_id) if r["kind"] == "limit"]
    assert stop["reason"] == outcome.reason
    job.verified_log()


async def test_the_same_run_within_its_cost_usd_completes(job: Job) -> None:
    outcome = await _two_writes(job, "cost_usd = 100")
    assert outcome.status == "completed", outcome.reason
    assert (job.workspace / "a.txt").read_text() == "a\n"
    assert (job.workspace / "b.txt").read_text() == "b\n"
    assert outcome.usage is not None and 1 < outcome.usage["cost"]["amount"] <= 100
    job.verified_log()


async def test_a_tool_calls_limit_stops_it_mid_turn_and_its_next_write_is_never_made(
    job: Job,
) -> None:
    names = ("a.txt", "b.txt", "c.txt")
    steps = [write(str(job.workspace / n), n) for n in names]
    with StandIn(steps) as model:
        limits = _policy("tool_calls = 1")
        spec = job.spec(installed(CLAUDE_AGENT_ACP), policy=limits, **job.claude(model.url))
        outcome = await run_attempt(spec)
    assert outcome.status == "failed" and exit_code(outcome) == 1
    assert outcome.reason is not None
    assert outcome.reason.startswith(
        "Claude Agent was stopped at its tool_calls limit 1 ([limits] tool_calls: tool call 2, "
    ), outcome.reason
    assert (job.workspace / "a.txt").read_text() == "a.txt"
    assert not (job.workspace / "b.txt").exists() and not (job.workspace / "c.txt").exists()
    # a.txt's Write asked and allowed; any ask after the stop refused (the adapter
    # may see the cancel first and ask nothing more)
    verdicts = [p["verdict"] for p in records(outcome, "permission")]
    assert verdicts[0] == "allow" and set(verdicts[1:]) <= {"deny"}, verdicts
    assert model.tool_uses()[:2] == ["Write", "Write"], model.describe()
    assert "c.txt" not in str(model.tool_results())  # the model never got to the third
    job.verified_log()
