"""Budgets for real: the scripted agent over real pipes keeps calling tools and
reporting its usage (``usage_update`` with a cost, each round costing more),
and the attempt is stopped at ``[limits] cost_usd``, ``tokens`` or
``tool_calls``: the turn cancelled, the write the agent asks for next refused
and never made, the outcome ``failed`` naming the limit, exit code 1. The
neighbours: limits the agent reaches but does not pass let it finish, with
every write made; an agent that reports no usage is still stopped at its tool
calls, and the outcome says it reported none."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "audit"))
from audit_helpers import SCRIPTED, records, scripted_spec

from governor.attempt.lifecycle import run_attempt
from governor.cli import exit_code
from governor.ending.outcome import Outcome
from governor.policies.ceiling import parse_ceiling
from governor.policies.policy import parse_policy

ROUNDS = 6
GOVERNOR = Path(sys.executable).parent / "governor"


def rounds(count: int = ROUNDS, *, usage: bool = True) -> list[dict[str, Any]]:
    """Round k: a tool call announced, usage reported (context 1000*(k+1)
    tokens, 0.01*(k+1) USD so far), then the tool's write asked of the client."""
    steps: list[dict[str, Any]] = []
    for k in range(count):
        call = f"call-{k}"
        steps.append(
            {"update": {"sessionUpdate": "tool_call", "toolCallId": call, "title": f"write f{k}",
                        "kind": "edit", "status": "pending"}}
        )  # fmt: skip
        if usage:
            cost = {"amount": round(0.01 * (k + 1), 2), "currency": "USD"}
            steps.append(
                {"update": {"sessionUpdate": "usage_update", "used": 1000 * (k + 1),
                            "size": 200_000, "cost": cost}}
            )  # fmt: skip
        steps.append(
            {"request": "fs/write_text_file",
             "params": {"sessionId": "{session}", "path": "{cwd}/f" + str(k) + ".txt", "content": "r\n"}}
        )  # fmt: skip
        steps.append(
            {"update": {"sessionUpdate": "tool_call_update", "toolCallId": call,
                        "status": "completed"}}
        )  # fmt: skip
    return [*steps, {"say": "all written"}]


async def attempt(tmp_path: Path, limits: str, steps: list[dict[str, Any]], **kw: Any) -> Outcome:
    policy = parse_policy(f'capability = "edit-workspace"\n[limits]\n{limits}\n', "job.toml")
    return await run_attempt(scripted_spec(tmp_path, steps, policy=policy, **kw))


def written(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "ws").iterdir())


def check_stopped(tmp_path: Path, outcome: Outcome, limit: str, made: int) -> None:
    """Stopped at `limit` with the first `made` rounds' writes made, the next
    ones refused and never carried out, the limit recorded."""
    assert outcome.status == "failed"
    assert outcome.reason == f"scripted was stopped at its {limit}", outcome.reason
    assert exit_code(outcome) == 1
    assert written(tmp_path) == [f"f{k}.txt" for k in range(made)]
    log = records(tmp_path / "audit.jsonl")
    (stop,) = [r for r in log if r["kind"] == "limit"]
    assert stop["reason"] == outcome.reason
    writes = [r for r in log if r["kind"] == "write"]
    assert [w["verdict"] for w in writes[:made]] == ["allow"] * made
    # the next write (and any the agent asks for before the cancel reaches it) refused
    refused = writes[made:]
    assert refused and {w["verdict"] for w in refused} == {"deny"}, refused
    assert refused[0]["subject"]["path"].endswith(f"f{made}.txt")
    assert refused[0]["seq"] > stop["seq"]


async def test_an_agent_is_stopped_at_cost_usd_by_the_cost_it_reports(tmp_path: Path) -> None:
    outcome = await attempt(tmp_path, "cost_usd = 0.035", rounds())
    check_stopped(tmp_path, outcome, "cost_usd limit 0.035 USD ([limits] cost_usd: 0.04 USD reported)", 3)
    # What the agent reported, until it saw the cancel (it may report a round more).
    assert outcome.usage is not None
    assert outcome.usage["cost"]["currency"] == "USD" and outcome.usage["cost"]["amount"] >= 0.04
    assert outcome.usage["tokens"] >= 4000 and outcome.usage["tool_calls"] >= 4
    assert outcome.usage["reported"] is True and outcome.usage["size"] == 200_000


async def test_an_agent_is_stopped_at_tokens_by_the_context_it_reports(tmp_path: Path) -> None:
    outcome = await attempt(tmp_path, "tokens = 2500", rounds())
    check_stopped(tmp_path, outcome, "tokens limit 2500 ([limits] tokens: 3000 reported)", 2)


async def test_an_agent_is_stopped_at_tool_calls_counted_by_the_governor(tmp_path: Path) -> None:
    outcome = await attempt(tmp_path, "tool_calls = 4", rounds())
    limit = "tool_calls limit 4 ([limits] tool_calls: tool call 5, 'call-4', was one too many)"
    check_stopped(tmp_path, outcome, limit, 4)
    assert outcome.usage is not None and outcome.usage["tool_calls"] >= 5


async def test_limits_reached_but_not_passed_let_the_agent_finish(tmp_path: Path) -> None:
    limits = "cost_usd = 0.06\ntokens = 6000\ntool_calls = 6"
    outcome = await attempt(tmp_path, limits, rounds())
    assert outcome.status == "completed", outcome.reason
    assert outcome.summary == "all written"
    assert written(tmp_path) == [f"f{k}.txt" for k in range(ROUNDS)]
    assert outcome.usage is not None
    assert (outcome.usage["tokens"], outcome.usage["tool_calls"]) == (6000, 6)
    assert outcome.usage["cost"] == {"amount": 0.06, "currency": "USD"}
    assert not [r for r in records(tmp_path / "audit.jsonl") if r["kind"] == "limit"]
    assert outcome.acp is not None
    assert not any("reported no usage" in n for n in outcome.acp.notices)


async def test_an_agent_that_reports_no_usage_is_still_stopped_at_its_tool_calls(
    tmp_path: Path,
) -> None:
    outcome = await attempt(tmp_path, "tool_calls = 2\ncost_usd = 0.01", rounds(usage=False))
    limit = "tool_calls limit 2 ([limits] tool_calls: tool call 3, 'call-2', was one too many)"
    check_stopped(tmp_path, outcome, limit, 2)
    assert outcome.usage is not None and outcome.usage["tool_calls"] >= 3
    assert outcome.usage == {"tokens": None, "tool_calls": outcome.usage["tool_calls"],
                             "reported": False, "observed": None, "strength": "none"}  # fmt: skip
    assert outcome.acp is not None
    assert (
        "scripted reported no usage (tokens, cost): it was limited by tool calls and wall "
        "time only" in outcome.acp.notices
    )


async def test_the_turn_s_total_in_the_prompt_answer_counts_at_the_end_of_the_turn(
    tmp_path: Path,
) -> None:
    steps = [*rounds(2, usage=False), {"usage": {"totalTokens": 9000, "inputTokens": 8000,
                                                 "outputTokens": 1000}}]  # fmt: skip
    outcome = await attempt(tmp_path, "tokens = 5000", steps)
    assert outcome.status == "failed"
    assert outcome.reason == "scripted was stopped at its tokens limit 5000 ([limits] tokens: 9000 reported)"
    assert written(tmp_path) == ["f0.txt", "f1.txt"]  # it was done: the limit was passed at its end
    assert outcome.usage is not None
    assert outcome.usage["outputTokens"] == 1000 and outcome.usage["tokens"] == 9000
    neighbour = tmp_path / "neighbour"
    neighbour.mkdir()
    outcome = await attempt(neighbour, "tokens = 9000", steps)
    assert outcome.status == "completed", outcome.reason


async def test_an_unset_budget_takes_the_ceiling_s_maximum(tmp_path: Path) -> None:
    ceiling = parse_ceiling('allowed_agents = ["acp"]\nmax_tool_calls = 3\n', "ceiling.toml")
    outcome = await attempt(tmp_path, "", rounds(), ceiling=ceiling)
    limit = "tool_calls limit 3 ([limits] tool_calls: tool call 4, 'call-3', was one too many)"
    check_stopped(tmp_path, outcome, limit, 3)


def test_governor_run_exits_1_with_the_limit_and_the_usage_in_its_json(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "script.json").write_text(json.dumps(rounds()))
    policy = tmp_path / "job.toml"
    policy.write_text('capability = "edit-workspace"\n[limits]\ncost_usd = 0.035\n')
    argv = [str(GOVERNOR), "run", "--json", "--policy", str(policy), "--workspace", str(ws)]
    argv += ["--log", str(tmp_path / "audit.jsonl"), "play the script", "--"]
    argv += [sys.executable, str(SCRIPTED), "--script", str(tmp_path / "script.json")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "failed"
    assert "stopped at its cost_usd limit 0.035 USD" in outcome["reason"]
    assert outcome["usage"]["cost"]["amount"] >= 0.04
    assert outcome["usage"]["tool_calls"] >= 4 and outcome["usage"]["reported"] is True
    assert written(tmp_path) == ["f0.txt", "f1.txt", "f2.txt"]  # in the agent's own sandbox
    shown = subprocess.run(argv[:2] + argv[3:], capture_output=True, text=True, timeout=120)
    rows = {line.split(None, 1)[0]: line.split(None, 1)[1] for line in shown.stdout.splitlines()}
    assert rows["reason"].startswith("scripted was stopped at its cost_usd limit 0.035 USD")
    assert re.fullmatch(r"\d+ tokens, [0-9.]+ USD, \d+ tool call\(s\)", rows["usage"]), rows


@pytest.mark.parametrize("limit", ["tool_calls = 0", "cost_usd = -1"])
def test_a_bad_budget_is_refused_before_start_naming_the_key(tmp_path: Path, limit: str) -> None:
    policy = tmp_path / "job.toml"
    policy.write_text(f'capability = "edit-workspace"\n[limits]\n{limit}\n')
    done = subprocess.run(
        [str(GOVERNOR), "run", "--policy", str(policy), "--workspace", str(tmp_path), "t", "--",
         sys.executable, str(SCRIPTED)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert f"limits.{limit.split()[0]}" in done.stderr and str(policy) in done.stderr
