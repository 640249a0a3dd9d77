"""The TypeScript SDK's example agent (@agentclientprotocol/sdk 1.9.0), a real node
process nobody here wrote, under the governor.

Its turn is canned, about 5 s: a message, a read tool call, then a permission
request to edit ``/home/user/project/config.json`` -- a fake path, outside any
workspace a test has -- with options ``allow`` (allow_once) and ``reject``
(reject_once); it then ends ``end_turn``. It uses no fs or terminal methods.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from npm_agents import TS_EXAMPLE, Job, installed, records
from wiretap import read as read_wire

from governor.attempt.lifecycle import run_attempt
from governor.ending.outcome import Outcome
from governor.gate.approver import Ask
from governor.policies.capability import Capability
from governor.policies.ceiling import CUSTOM_AGENT, Ceiling
from governor.policies.policy import parse_policy

pytestmark = [pytest.mark.e2e, pytest.mark.npm_agent(TS_EXAMPLE)]

CONFIG = "/home/user/project/config.json"
FULL = Ceiling(max_capability=Capability.FULL_ACCESS, allowed_agents=(CUSTOM_AGENT,))
"""An operator ceiling that permits full-access, the one capability under which a
write outside the roots is not a boundary refusal."""


def shared_attempt(
    factory: pytest.TempPathFactory, name: str, *, tap: bool = False, **kw: Any
) -> tuple[Outcome, Job]:
    """One attempt that several tests look at (a turn of this agent takes seconds).
    With ``tap``, behind the wiretap (unsandboxed: this agent touches no files)."""
    job = Job.under(factory.mktemp(name))
    argv = installed(TS_EXAMPLE)
    if tap:
        argv, kw = job.tapped(argv), {**kw, "sandbox_agent": False}
    outcome = trio.run(run_attempt, job.spec(argv, **kw))
    return outcome, job


def answer_to(wire: list[dict[str, Any]], method: str, to: str) -> tuple[int, dict[str, Any]]:
    """(index, message) of the answer to the first ``method`` request sent towards ``to``'s
    peer, as it crossed the wire towards ``to``; (-1, {}) if it never did."""
    sender = "governor" if to == "agent" else "agent"
    request = next(
        r["msg"] for r in wire if r.get("to") == sender and r.get("msg", {}).get("method") == method
    )
    for i, r in enumerate(wire):
        msg = r.get("msg")
        if not isinstance(msg, dict) or r.get("to") != to:
            continue
        if "method" not in msg and msg.get("id") == request["id"]:
            return i, msg
    return -1, {}


def stdin_closed(wire: list[dict[str, Any]]) -> int:
    """The index of the governor closing the agent's stdin (len(wire) if it never did)."""
    return next((i for i, r in enumerate(wire) if r.get("closed")), len(wire))


@pytest.fixture(scope="module")
def timed_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[Outcome, Job]:
    """A 3.5 s limit: the prompt goes out well inside it, and the agent would ask
    only about 4 s into its turn, so the timeout falls while it sleeps between steps."""
    return shared_attempt(tmp_path_factory, "timed-out", tap=True, timeout=3.5)


@pytest.fixture(scope="module")
def unanswered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Outcome, Job]:
    """Its edit is an ask, and the person approving it is still away when the 6 s
    limit falls (the agent asks about 4 s into its turn)."""

    async def away(ask: Ask) -> bool:
        await trio.sleep(600)
        return True

    policy = parse_policy('capability = "full-access"\n[ask]\ntools = ["edit"]', "e2e")
    return shared_attempt(
        tmp_path_factory,
        "unanswered",
        tap=True,
        policy=policy,
        capability=None,
        ceiling=FULL,
        approver=away,
        timeout=6,
    )


@pytest.fixture(scope="module")
def paused(tmp_path_factory: pytest.TempPathFactory) -> tuple[Outcome, Job]:
    """Its edit is an ask under ``on_ask = "pause"`` (and inside full-access's boundary)."""
    policy = parse_policy(
        'capability = "full-access"\non_ask = "pause"\n[ask]\ntools = ["edit"]', "e2e"
    )
    return shared_attempt(
        tmp_path_factory, "paused", tap=True, policy=policy, capability=None, ceiling=FULL
    )


async def test_at_edit_workspace_its_edit_outside_the_workspace_is_refused_and_the_turn_still_ends(
    job: Job,
) -> None:
    outcome = await run_attempt(job.spec(installed(TS_EXAMPLE)))
    (asked,) = records(outcome, "permission")
    assert asked["subject"]["paths"] == [CONFIG]
    assert (asked["verdict"], asked["by"], asked["option"]) == ("deny", "capability", "reject")
    assert "outside the roots" in asked["reason"]
    # end_turn after the rejection: the agent skipped the change and said so.
    assert outcome.status == "completed", outcome.reason
    assert "skip the configuration update" in (outcome.summary or "")
    assert outcome.acp is not None and outcome.acp.tally.refused == 1
    assert not any(c["id"] == "call_2" for c in job.tool_calls("completed"))
    assert [r["kind"] for r in job.verified_log()][-1] == "attempt-end"


async def test_under_full_access_its_edit_is_allowed_once_and_the_agent_completes_it(
    job: Job,
) -> None:
    outcome = await run_attempt(
        job.spec(installed(TS_EXAMPLE), capability="full-access", ceiling=FULL)
    )
    (asked,) = records(outcome, "permission")
    assert (asked["verdict"], asked["option"]) == ("allow", "allow")
    assert outcome.status == "completed", outcome.reason
    assert "successfully updated the configuration" in (outcome.summary or "")
    assert {c["id"] for c in job.tool_calls("completed")} == {"call_1", "call_2"}
    assert outcome.acp is not None
    assert (outcome.acp.tally.allowed, outcome.acp.tally.refused) == (1, 0)
    # Its read (call_1) never came through the governor: reported, not unasked.
    (reported,) = records(outcome, "reported")
    assert reported["subject"]["tool_call"] == "call_1"
    assert outcome.acp.unasked == 0


def test_a_timeout_while_it_works_cancels_the_turn_before_it_asks(
    timed_out: tuple[Outcome, Job],
) -> None:
    outcome, job = timed_out
    kinds = [k for k, _ in job.events]
    assert "prompt" in kinds and "message" in kinds  # the turn had started
    assert outcome.status == "failed"
    assert "did not finish within 3.5 s (the wall limit); its turn was cancelled" in (outcome.reason or "")
    assert records(outcome, "permission") == []
    assert not any(c["id"] == "call_2" for c in job.tool_calls())
    assert [r["kind"] for r in job.verified_log()][-1] == "attempt-end"


def test_after_a_timeout_the_agent_answers_the_prompt_cancelled_before_its_stdin_closes(
    timed_out: tuple[Outcome, Job],
) -> None:
    _, job = timed_out
    wire = read_wire(job.wire)
    i, answer = answer_to(wire, "session/prompt", "governor")
    assert answer.get("result", {}).get("stopReason") == "cancelled", wire[-4:]
    assert i < stdin_closed(wire)


def test_an_ask_still_waiting_for_a_person_at_the_timeout_is_refused_as_cancelled_and_logged(
    unanswered: tuple[Outcome, Job],
) -> None:
    outcome, job = unanswered
    assert outcome.status == "failed"
    assert "did not finish within 6 s" in (outcome.reason or "")
    assert not any(c["id"] == "call_2" for c in job.tool_calls("completed"))
    (asked,) = [r for r in records(outcome, "permission") if r["rule"] == "ask: tool edit"]
    assert asked["subject"]["tool_call"] == "call_2"
    assert asked["verdict"] == "deny" and "cancelled" in asked["reason"], asked
    assert [r["kind"] for r in job.verified_log()][-1] == "attempt-end"


def test_an_ask_still_waiting_at_the_timeout_is_answered_cancelled_on_the_wire(
    unanswered: tuple[Outcome, Job],
) -> None:
    _, job = unanswered
    wire = read_wire(job.wire)
    i, answer = answer_to(wire, "session/request_permission", "agent")
    assert answer.get("result", {}).get("outcome") == {"outcome": "cancelled"}, wire[-4:]
    assert i < stdin_closed(wire)


def test_an_ask_answered_pause_rejects_the_edit_and_ends_needing_approval(
    paused: tuple[Outcome, Job],
) -> None:
    outcome, job = paused
    assert outcome.status == "needs_approval", outcome.reason
    assert outcome.pending is not None
    assert outcome.pending["subject"]["title"] == "Modifying critical configuration file"
    asked = [r for r in records(outcome, "permission") if r["verdict"] == "approval"]
    assert [(r["rule"], r["option"]) for r in asked] == [("ask: tool edit", "reject")]
    assert outcome.acp is not None and outcome.acp.tally.waited == 1
    assert not any(c["id"] == "call_2" for c in job.tool_calls("completed"))
    assert [r["kind"] for r in job.verified_log()][-1] == "attempt-end"


def test_a_pause_answers_reject_then_cancels_and_the_agent_answers_the_prompt_cancelled(
    paused: tuple[Outcome, Job],
) -> None:
    _, job = paused
    wire = read_wire(job.wire)
    _, permission = answer_to(wire, "session/request_permission", "agent")
    assert permission["result"]["outcome"] == {"outcome": "selected", "optionId": "reject"}
    cancel = next(
        i for i, r in enumerate(wire) if r.get("msg", {}).get("method") == "session/cancel"
    )
    i, prompt = answer_to(wire, "session/prompt", "governor")
    assert prompt["result"]["stopReason"] == "cancelled", wire[-4:]
    assert cancel < i < stdin_closed(wire)


def test_the_reason_of_a_paused_attempt_says_waiting_for_approval_once(
    paused: tuple[Outcome, Job],
) -> None:
    outcome, _ = paused
    assert (outcome.reason or "").count("waiting for a person's approval") == 1, outcome.reason
