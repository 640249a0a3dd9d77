"""One question per action: a person's yes to a permission covers the governed
requests that carry out that tool call (its command's ``terminal/create``, its
write of a path it named), once; a ``deny`` rule still wins, and anything else
is decided on its own."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "audit"))

from audit_helpers import demo_spec, scripted_spec

from governor.attempt.lifecycle import run_attempt
from governor.audit.reading import decision_records
from governor.gate.approver import Ask
from governor.policies.policy import parse_policy


def _yes_to_all(asked: list[Ask]) -> Callable[[Ask], bool]:
    """A callback approver that says yes to every ask, noting each in ``asked``."""

    def approve(ask: Ask) -> bool:
        asked.append(ask)
        return True

    return approve


def _decisions(outcome: Any, kind: str) -> list[tuple[str, str, str]]:
    return [
        (r["verdict"], r["by"], r["reason"])
        for r in decision_records(outcome.log, outcome.run_id)
        if r["kind"] == kind
    ]


async def test_a_yes_to_the_demos_command_is_not_asked_again_at_its_terminal(
    tmp_path: Path,
) -> None:
    asked: list[Ask] = []
    approve = _yes_to_all(asked)
    policy = parse_policy('capability = "edit-workspace"\n[ask]\ncommands = ["python3 *"]', "t")
    outcome = await run_attempt(
        demo_spec(tmp_path, tmp_path / "a.jsonl", policy=policy, approver=approve)
    )
    assert outcome.status == "completed", outcome.reason
    assert [a.kind for a in asked] == ["permission"]  # one question
    (permission,) = [
        r
        for r in decision_records(outcome.log, outcome.run_id)
        if r["kind"] == "permission" and r["by"] == "person"
    ]
    terminals = _decisions(outcome, "terminal")
    verdict, by, reason = terminals[0]
    assert (verdict, by) == ("allow", "grant")
    assert f"allowed by a person (seq {permission['seq']})" in reason
    assert outcome.acp is not None and outcome.acp.tally.waited == 1


def _steps(command: str, terminal: str) -> list[dict[str, Any]]:
    return [
        {
            "request": "session/request_permission",
            "params": {
                "sessionId": "{session}",
                "toolCall": {
                    "toolCallId": "call-1",
                    "title": f"Run {command}",
                    "kind": "execute",
                    "rawInput": {"command": command},
                },
                "options": [
                    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
                ],
            },
        },
        {
            "request": "terminal/create",
            "params": {"sessionId": "{session}", "command": terminal, "cwd": "{cwd}"},
        },
        {
            "request": "terminal/create",
            "params": {"sessionId": "{session}", "command": terminal, "cwd": "{cwd}"},
        },
    ]


async def test_the_yes_covers_that_command_once_and_a_deny_rule_still_wins(
    tmp_path: Path,
) -> None:
    asked: list[Ask] = []
    approve = _yes_to_all(asked)
    policy = parse_policy('capability = "edit-workspace"\n[ask]\ncommands = ["echo *"]\n', "t")
    outcome = await run_attempt(
        scripted_spec(tmp_path, _steps("echo hi", "echo hi"), policy=policy, approver=approve)
    )
    assert outcome.status == "completed", outcome.reason
    firsts = [
        r
        for r in decision_records(outcome.log, outcome.run_id)
        if r["kind"] == "terminal" and r.get("subject", {}).get("command") == "echo hi"
    ]
    assert firsts[0]["by"] == "grant" and "seq" in firsts[0]["reason"]
    # the second terminal/create of the same line is a new action: asked again
    assert [a.kind for a in asked] == ["permission", "terminal"]


async def test_a_deny_rule_refuses_the_terminal_after_a_persons_yes(tmp_path: Path) -> None:
    def approve(ask: Ask) -> bool:
        return True

    # the permission names `echo hi` (asked, allowed); its terminal runs a line
    # a deny rule matches: refused, whatever the person said
    policy = parse_policy(
        'capability = "edit-workspace"\n[ask]\ncommands = ["echo *"]\n'
        '[deny]\ncommands = ["touch *"]\n',
        "t",
    )
    steps = _steps("echo hi", "echo hi; touch pwned")[:2]  # the yes was for `echo hi`
    outcome = await run_attempt(scripted_spec(tmp_path, steps, policy=policy, approver=approve))
    terminals = [
        r for r in decision_records(outcome.log, outcome.run_id) if r["kind"] == "terminal"
    ]
    assert "deny" in [r["verdict"] for r in terminals], terminals
    assert not any("seq" in r["reason"] for r in terminals)  # the yes did not carry
    assert not (tmp_path / "ws" / "pwned").exists()
