"""The budget, as plain values: each limit passed by the report or the call
that takes the attempt past it (never by one that only reaches it), the first
limit passed the reason, tokens read as the most the agent reported, a cost
compared only in USD, and an agent that reports nothing said to."""

from __future__ import annotations

from acp import schema

from governor.attempt.budget import Budget, usage_line
from governor.policies.limits import Limits


def usage_update(used: int, cost: float | None = None, currency: str = "USD") -> schema.UsageUpdate:
    return schema.UsageUpdate.model_validate(
        {"sessionUpdate": "usage_update", "used": used, "size": 200_000}
        | ({} if cost is None else {"cost": {"amount": cost, "currency": currency}})
    )


def turn_usage(total: int) -> schema.Usage:
    return schema.Usage.model_validate(
        {"totalTokens": total, "inputTokens": total - 10, "outputTokens": 10}
    )


def budget(**limits: float) -> tuple[Budget, list[str]]:
    passed: list[str] = []
    return Budget(Limits(**limits), "scripted", passed.append), passed  # type: ignore[arg-type]


def test_the_tool_call_past_the_limit_stops_the_attempt_and_the_one_reaching_it_does_not() -> None:
    b, passed = budget(tool_calls=2)
    b.tool_call("a")
    b.tool_call("b")
    assert passed == [] and b.over is None  # two calls of two: within
    b.tool_call("c")
    assert passed == ["tool_calls limit 2 ([limits] tool_calls: tool call 3, 'c', was one too many)"]
    b.tool_call("d")
    assert len(passed) == 1  # told once


def test_tokens_are_the_greater_of_the_context_s_high_water_mark_and_the_turn_s_total() -> None:
    b, passed = budget(tokens=5000)
    b.report(usage_update(4000))
    b.report(usage_update(1200))  # compacted: the high-water mark stays
    assert b.tokens == 4000 and passed == []
    b.report(turn_usage(5000))
    assert passed == []
    b.report(turn_usage(5001))
    assert passed == ["tokens limit 5000 ([limits] tokens: 5001 reported)"]


def test_a_cost_past_cost_usd_stops_the_attempt_and_one_at_it_does_not() -> None:
    b, passed = budget(cost_usd=0.5)
    b.report(usage_update(10, cost=0.5))
    assert passed == []
    b.report(usage_update(20, cost=0.75))
    assert passed == ["cost_usd limit 0.5 USD ([limits] cost_usd: 0.75 USD reported)"]
    assert b.usage({"used": 20}) == {
        "used": 20,
        "tokens": 20,
        "tool_calls": 0,
        "reported": True,
    }


def test_the_first_limit_passed_is_the_reason() -> None:
    b, passed = budget(tokens=100, cost_usd=0.01, tool_calls=1)
    b.report(usage_update(500, cost=1.0))
    b.tool_call("x")
    b.tool_call("y")
    assert passed == ["tokens limit 100 ([limits] tokens: 500 reported)"]
    assert b.over == passed[0]


def test_a_cost_in_another_currency_or_not_an_amount_is_never_compared_and_said_so() -> None:
    b, passed = budget(cost_usd=0.01)
    b.report(usage_update(10, cost=99.0, currency="EUR"))
    assert passed == []
    assert b.notices() == [
        "scripted reported its cost in 'EUR', not USD: the cost_usd limit was not applied to it"
    ]
    b.report(usage_update(10, cost=float("nan")))
    assert passed == [] and "which is not an amount" in b.notices()[0]
    b.report(usage_update(10, cost=0.02))
    assert passed == ["cost_usd limit 0.01 USD ([limits] cost_usd: 0.02 USD reported)"]


def test_an_agent_that_reports_nothing_is_said_to_and_still_counted_by_tool_calls() -> None:
    b, passed = budget(tool_calls=1)
    b.tool_call("only")
    assert b.usage(None) == {"tokens": None, "tool_calls": 1, "reported": False}
    assert b.notices() == [
        "scripted reported no usage (tokens, cost): it was limited by tool calls and wall time only"
    ]
    b.tool_call("second")
    assert passed and passed[0].startswith("tool_calls limit 1")


def test_without_limits_nothing_is_ever_passed() -> None:
    b, passed = budget()
    for n in range(1000):
        b.tool_call(str(n))
    b.report(usage_update(10**9, cost=10**6))
    assert passed == [] and b.over is None
    assert b.usage(None)["tool_calls"] == 1000


def test_the_usage_line_a_person_reads_says_what_was_reported_and_what_was_not() -> None:
    b, _ = budget()
    b.tool_call("x")
    assert usage_line(b.usage(None)) == "none reported by the agent; 1 tool call(s)"
    b.report(usage_update(4000, cost=0.04))
    assert usage_line(b.usage({"cost": b.cost})) == "4000 tokens, 0.04 USD, 1 tool call(s)"
    assert usage_line(None) is None  # a plain program: no usage at all


def test_the_tokens_seen_on_the_wire_in_earlier_parts_count_against_the_limit_after_a_pause() -> None:
    """A paused attempt going on: the wire's count of its earlier parts is carried
    beside the agent's reports (each held against the limit on its own), so an
    agent that reported little has no fresh allowance after the pause."""
    b, passed = budget(tokens=120_000)
    b.carry(1, 13, None, (), 50_012)
    b.observed(50_012)
    assert passed == [] and b.total_wire_tokens == 100_024  # within
    b.observed(100_024)
    assert passed == [
        "tokens limit 120000 ([limits] tokens: 150036 seen on the wire, 50012 of them in earlier parts)"
    ]
    assert b.total_tokens == 13  # the agent's reports are their own count
