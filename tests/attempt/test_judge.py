"""The judge as a table: each ending's facts give the status and reason the
lifecycle's old ten-branch if/elif gave (rows written from that code, before it
became `governor.ending.how_it_ended.PRECEDENCE`)."""

from __future__ import annotations

from typing import Any

import pytest

from governor.audit.tally import Tally
from governor.boundary.secrets import MASK, Masker
from governor.ending.how_it_ended import PRECEDENCE, SAID_CHARS, CommandResult, Ending, judge, said

PAUSE = {"kind": "terminal", "request": 3, "subject": {"command": "rm x"}, "reason": "waiting: rm"}
GAVE_UP = "sent 1,000 lines in a row that are not JSON-RPC (1,000 not JSON)"


def ending(**facts: Any) -> Ending:
    return Ending(agent="Agent", preset="acp", run_id="run", elapsed_s=12.2, timeout_s=30.0, **facts)


# (facts, status, reason); the summary is checked apart.
TABLE: list[tuple[dict[str, Any], str, str | None]] = [
    # each fact alone
    ({}, "failed", "Agent ended without an answer"),
    ({"command": CommandResult(0, "all done\n", "")}, "completed", None),
    ({"command": CommandResult(0, "BLOCKED: no spec\n", "")}, "blocked", "no spec"),
    ({"command": CommandResult(2, "", "boom\nerr line\n")}, "failed", "Agent exited 2: boom | err line"),
    ({"command": CommandResult(2, "said why\n", "x")}, "failed", "Agent exited 2: said why"),
    ({"command": CommandResult(-9, "", "")}, "failed", "Agent exited by a signal: "),
    ({"pending": PAUSE}, "needs_approval", "waiting: rm"),
    ({"failure": "the sandbox stopped working: gone"}, "failed", "the sandbox stopped working: gone"),
    ({"broke": "the governor failed during the attempt: boom"}, "failed", "the governor failed during the attempt: boom"),
    ({"gave_up": GAVE_UP}, "failed", f"Agent {GAVE_UP}; the governor stopped listening to it"),
    ({"limit": "cpu limit 2 s (killed by SIGXCPU)", "error": "Agent ended without an answer: x"}, "failed", "Agent was stopped at its cpu limit 2 s (killed by SIGXCPU)"),
    ({"limit": "memory limit 1G (an allocation over it was refused)", "gave_up": GAVE_UP}, "failed", "Agent was stopped at its memory limit 1G (an allocation over it was refused)"),
    ({"command": CommandResult(152, "", "CPU time limit exceeded"), "limit": "cpu limit 2 s (killed by SIGXCPU)"}, "failed", "Agent exited 152, stopped at its cpu limit 2 s (killed by SIGXCPU): CPU time limit exceeded"),
    ({"blocked": "the spec asks for 2+2=5", "stop_reason": "cancelled"}, "blocked", "the spec asks for 2+2=5"),
    ({"interrupted": True}, "failed", "the governor was interrupted after 12 s; Agent's turn was cancelled"),
    ({"sign_in": "claude /login", "error": "Agent needs signing in: claude /login"}, "failed", "Agent needs signing in: claude /login"),
    ({"timed_out": True}, "failed", "Agent did not finish within 30 s (the wall limit); its turn was cancelled"),
    ({"stop_reason": "end_turn", "final_message": "Done."}, "completed", None),
    ({"stop_reason": "end_turn", "final_message": "BLOCKED: cannot"}, "blocked", "cannot"),
    ({"stop_reason": "end_turn", "final_message": "FAILED: tests red"}, "failed", "FAILED: tests red"),
    ({"stop_reason": "max_tokens", "final_message": "partial"}, "incomplete", "Agent stopped at its own limit (max_tokens)"),
    ({"stop_reason": "max_turn_requests", "final_message": "BLOCKED: x"}, "blocked", "x"),
    ({"stop_reason": "refusal", "final_message": "no"}, "failed", "Agent refused the task: no"),
    ({"stop_reason": "cancelled"}, "failed", "Agent's turn was cancelled"),
    ({"stop_reason": "weird"}, "failed", "Agent ended its turn: weird"),
    ({"error": "Agent did not initialize: boom"}, "failed", "Agent did not initialize: boom"),
    # precedence, each row against the next
    ({"command": CommandResult(0, "ok", ""), "pending": PAUSE}, "completed", None),
    ({"command": CommandResult(0, "ok", ""), "timed_out": True}, "failed", "Agent did not finish within 30 s (the wall limit); its turn was cancelled"),
    ({"command": CommandResult(0, "ok", ""), "interrupted": True}, "failed", "the governor was interrupted after 12 s; Agent's turn was cancelled"),
    ({"pending": PAUSE, "failure": "broken"}, "needs_approval", "waiting: rm"),
    ({"failure": "broken", "broke": "the governor failed"}, "failed", "broken"),
    ({"broke": "the governor failed", "limit": "cpu limit 2 s"}, "failed", "the governor failed"),
    ({"failure": "broken", "gave_up": GAVE_UP}, "failed", "broken"),
    ({"gave_up": GAVE_UP, "interrupted": True}, "failed", f"Agent {GAVE_UP}; the governor stopped listening to it"),
    ({"gave_up": GAVE_UP, "blocked": "no spec"}, "failed", f"Agent {GAVE_UP}; the governor stopped listening to it"),
    ({"blocked": "no spec", "interrupted": True}, "blocked", "no spec"),
    ({"interrupted": True, "timed_out": True, "sign_in": "x", "error": "e"}, "failed", "the governor was interrupted after 12 s; Agent's turn was cancelled"),
    ({"sign_in": "x", "error": "Agent needs signing in: x", "timed_out": True}, "failed", "Agent needs signing in: x"),
    ({"timed_out": True, "stop_reason": "end_turn", "final_message": "Done."}, "failed", "Agent did not finish within 30 s (the wall limit); its turn was cancelled"),
    ({"stop_reason": "end_turn", "final_message": "Done.", "error": "late"}, "completed", None),
    # the agent's last meaningful stderr lines join a failure that does not hold them already
    ({"stderr_tail": ("first", "last words", "")}, "failed", "Agent ended without an answer -- Agent said: first | last words"),
    ({"stderr_tail": ("0", "a", "b", "c", "}", "  ]", "---")}, "failed", "Agent ended without an answer -- Agent said: a | b | c"),
    ({"stderr_tail": ("}",)}, "failed", "Agent ended without an answer"),
    ({"unseen_folders": ("XDG_CACHE_HOME=/tmp/c",)}, "failed", "Agent ended without an answer -- Agent was given XDG_CACHE_HOME=/tmp/c, a folder its sandbox does not show (keep one with the policy's [sandbox] keep, or point the variable inside the workspace)"),
    ({"stop_reason": "end_turn", "final_message": "Done.", "unseen_folders": ("A_DIR=/tmp/a",)}, "completed", None),
    ({"error": "Agent did not initialize: boom", "stderr_tail": ("boom",)}, "failed", "Agent did not initialize: boom"),
    ({"stop_reason": "end_turn", "final_message": "Done.", "stderr_tail": ("noise",)}, "completed", None),
    ({"pending": PAUSE, "stderr_tail": ("noise",)}, "needs_approval", "waiting: rm"),
]


@pytest.mark.parametrize(("facts", "status", "reason"), TABLE)
def test_an_endings_facts_give_the_status_and_reason_of_the_first_row_that_holds(
    facts: dict[str, Any], status: str, reason: str | None
) -> None:
    outcome = judge(ending(**facts))
    assert (outcome.status, outcome.reason) == (status, reason)


def test_a_completed_turn_keeps_the_final_message_as_its_summary() -> None:
    assert judge(ending(stop_reason="end_turn", final_message="  Done.\n")).summary == "Done."
    command = judge(ending(command=CommandResult(0, "wrote it\n", "")))
    assert command.summary == "wrote it"
    assert judge(ending(stop_reason="max_tokens", final_message="half")).summary == "half"


def test_the_table_holds_a_row_decided_by_each_rule_of_the_precedence() -> None:
    deciders = {
        next(name for name, rule in PRECEDENCE if rule(ending(**facts)) is not None)
        for facts, _, _ in TABLE
    }
    assert deciders == {name for name, _ in PRECEDENCE}


def test_the_outcome_says_what_was_done_unasked_unsandboxed_and_malformed() -> None:
    outcome = judge(
        ending(
            stop_reason="end_turn",
            final_message="ok",
            tally=Tally(asked=2, allowed=2, unasked=1),
            unasked_paths=("notes.txt",),
            sandboxed_agent=False,
            bad_updates=3,
            notices=("earlier notice",),
            mode={"id": "default", "name": "Default", "asks": True},
        )
    )
    assert outcome.acp is not None
    assert outcome.acp.notices == [
        "earlier notice",
        "Agent did 1 thing(s) without asking: notes.txt",
        "Agent ran without the agent sandbox: what it did without asking was not confined",
        "Agent sent 3 malformed session update(s); they were logged and ignored",
    ]
    assert outcome.acp.decides_alone and outcome.acp.known and outcome.acp.unasked == 1
    quiet = judge(ending(stop_reason="end_turn", mode={"id": "x", "name": "x", "asks": None}))
    assert quiet.acp is not None and quiet.acp.notices == []
    assert not quiet.acp.decides_alone and not quiet.acp.known


def test_every_text_from_the_agent_is_masked() -> None:
    secret = "hunter2-very-secret"
    outcome = judge(
        ending(
            masker=Masker([secret]),
            error=f"Agent printed {secret}",
            notices=(f"note {secret}",),
            plan=[{"content": f"use {secret}", "status": "pending"}],
            pending={"reason": f"ask {secret}", "subject": {"command": f"echo {secret}"}},
        )
    )
    assert outcome.status == "needs_approval"
    text = repr(outcome.to_json())
    assert secret not in text
    assert outcome.reason == f"ask {MASK}"
    assert outcome.pending == {"reason": f"ask {MASK}", "subject": {"command": f"echo {MASK}"}}
    assert outcome.acp is not None and outcome.acp.notices == [f"note {MASK}"]
    assert outcome.acp.plan == [{"content": f"use {MASK}", "status": "pending"}]


def test_what_the_agent_said_is_bounded_to_its_newest_characters() -> None:
    words = said(("a" * 2000, "the end"))
    assert words is not None and len(words) == SAID_CHARS + 3
    assert words.startswith("...") and words.endswith("a | the end")
