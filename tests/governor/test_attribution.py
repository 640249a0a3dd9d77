"""What explains each change in the workspace, rule by rule (`governor.attribution`)."""

from __future__ import annotations

from typing import Any

import pytest

from governor.attribution import RULES, Allowance, Cause, Evidence, explain
from governor.workspace import Change, Snapshot

WRITTEN = "/ws/written.txt"


def evidence(**kw: Any) -> Evidence:
    base: dict[str, Any] = {
        "written": {WRITTEN: (3, 100)},
        "current": Snapshot({WRITTEN: (3, 100), "/ws/later.txt": (3, 999)}),
        "commands": [(200, 300)],
        "allowed": [
            Allowance("call-1", 7, frozenset({"/ws/named.txt"}), 400, 500),
            Allowance("call-2", 9, frozenset(), 600, None),
        ],
        "ended_ns": 700,
    }
    base.update(kw)
    return Evidence(**base)


TABLE: list[tuple[Change, Cause | None]] = [
    (Change(WRITTEN, "changed", 100), Cause("written")),
    (Change("/ws/named.txt", "created", 50), Cause("named", "call-1", 7)),
    (Change("/ws/by-command.txt", "created", 250), Cause("command")),
    (Change("/ws/in-window.txt", "created", 450), Cause("window", "call-1", 7)),
    (Change("/ws/open-window.txt", "changed", 650), Cause("window", "call-2", 9)),
    (Change("/ws/old.txt", "deleted", None), Cause("deleted")),
    # nothing explains these
    (Change("/ws/before.txt", "created", 10), None),
    (Change("/ws/between.txt", "created", 550), None),  # after call-1 completed
    (Change("/ws/after-the-turn.txt", "created", 800), None),
]


@pytest.mark.parametrize(("change", "cause"), TABLE)
def test_a_change_is_explained_by_the_first_rule_that_holds(
    change: Change, cause: Cause | None
) -> None:
    assert explain(change, evidence()) == cause


def test_a_governed_write_changed_again_afterwards_is_not_explained_by_it() -> None:
    later = evidence(current=Snapshot({WRITTEN: (5, 150)}), allowed=[], commands=[])
    assert explain(Change(WRITTEN, "changed", 150), later) is None


def test_a_deletion_is_unexplained_when_nothing_governed_happened() -> None:
    assert (
        explain(Change("/ws/old.txt", "deleted", None), evidence(commands=[], allowed=[])) is None
    )


def test_every_rule_explains_a_row_of_the_table() -> None:
    rules = {cause.rule for _, cause in TABLE if cause is not None}
    assert rules == {name for name, _ in RULES}


def test_a_cause_names_its_tool_call_and_decision() -> None:
    assert Cause("window", "call-1", 7).to_json() == {
        "rule": "window",
        "tool_call": "call-1",
        "seq": 7,
    }
    assert Cause("command").to_json() == {"rule": "command"}
