"""What explains each change in the workspace, rule by rule (`governor.ending.attribution`)."""

from __future__ import annotations

from typing import Any

import pytest

from governor.confine.workspace import Change, Seen, Snapshot
from governor.ending.attribution import RULES, Allowance, Allowances, Cause, Evidence, explain

WRITTEN = "/ws/written.txt"
LEFT = Seen(3, 100, 100, 7, 0o100644)
"""How the governed write left WRITTEN."""


def evidence(**kw: Any) -> Evidence:
    base: dict[str, Any] = {
        "written": {WRITTEN: LEFT},
        "current": Snapshot({WRITTEN: LEFT, "/ws/later.txt": Seen(3, 999, 999, 8, 0o100644)}),
        "commands": [(200, 300)],
        "allowed": Allowances(
            [
                Allowance("call-1", 7, frozenset({"/ws/named.txt"}), 400, 500),
                Allowance("call-2", 9, frozenset(), 600, None),
            ]
        ),
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
    later = evidence(current=Snapshot({WRITTEN: LEFT._replace(size=5, mtime_ns=150, ctime_ns=150)}),
                     allowed=Allowances(), commands=[])  # fmt: skip
    assert explain(Change(WRITTEN, "changed", 150), later) is None


def test_a_governed_write_changed_again_with_its_size_and_mtime_put_back_is_not_explained_by_it() -> None:
    # the agent cannot put the ctime back: the write no longer explains the file
    later = evidence(current=Snapshot({WRITTEN: LEFT._replace(ctime_ns=150)}), allowed=Allowances(), commands=[])
    assert explain(Change(WRITTEN, "changed", 150), later) is None


def test_a_deletion_is_unexplained_when_nothing_governed_happened() -> None:
    assert (
        explain(Change("/ws/old.txt", "deleted", None), evidence(commands=[], allowed=Allowances())) is None
    )


PROGRAM = {"written": {}, "current": Snapshot({}), "commands": [], "allowed": Allowances(),
           "program": (1000, 2000)}  # fmt: skip
"""A plain program (``--kind command``) ran from 1000 to 2000 and nothing else did."""
PROGRAM_TABLE: list[tuple[Change, Cause | None]] = [
    (Change("/ws/fixed.py", "changed", 1500), Cause("program")),
    (Change("/ws/made.txt", "created", 2000), Cause("program")),
    (Change("/ws/gone.txt", "deleted", None), Cause("program")),
    (Change("/ws/before.txt", "created", 900), None),  # not in its run
    (Change("/ws/after.txt", "created", 2100), None),
]


@pytest.mark.parametrize(("change", "cause"), PROGRAM_TABLE)
def test_a_plain_program_s_changes_in_its_run_are_its_work(change: Change, cause: Cause | None) -> None:
    assert explain(change, evidence(**PROGRAM)) == cause
    assert explain(change, evidence(**{**PROGRAM, "program": None})) is None  # an ACP agent


def test_every_rule_explains_a_row_of_the_table() -> None:
    rules = {cause.rule for _, cause in [*TABLE, *PROGRAM_TABLE] if cause is not None}
    assert rules == {name for name, _ in RULES}


def test_a_cause_names_its_tool_call_and_decision() -> None:
    assert Cause("window", "call-1", 7).to_json() == {
        "rule": "window",
        "tool_call": "call-1",
        "seq": 7,
    }
    assert Cause("command").to_json() == {"rule": "command"}


def test_overlapping_windows_credit_the_first_and_the_first_naming_wins() -> None:
    # two permissions allowed while both calls run (a person answered the first
    # after the second was asked): a change in both windows is the first's
    allowed = Allowances(
        [
            Allowance("call-a", 1, frozenset({"/ws/x"}), 100, None),
            Allowance("call-b", 2, frozenset({"/ws/x", "/ws/y"}), 150, 200),
            Allowance("call-c", 3, frozenset(), 300, 400),
        ]
    )
    assert allowed.window(180, ended_ns=1000) == Cause("window", "call-a", 1)
    assert allowed.window(350, ended_ns=1000) == Cause("window", "call-a", 1)  # a is open
    assert allowed.window(50, ended_ns=1000) is None
    assert allowed.naming("/ws/x") == Cause("named", "call-a", 1)
    assert allowed.naming("/ws/y") == Cause("named", "call-b", 2)
    allowed.end("call-a", now=250)
    assert allowed.window(350, ended_ns=1000) == Cause("window", "call-c", 3)
    assert allowed.window(260, ended_ns=1000) is None  # between a's end and c's start


def test_many_allowances_answer_as_the_linear_rule_would() -> None:
    given = [Allowance(f"c{i}", i, frozenset(), i * 10, i * 10 + 5) for i in range(5000)]
    allowed = Allowances(given)
    for t in (0, 3, 5, 7, 49_995, 49_996, 12_344, 12_346):
        linear = next((a for a in given if a.start_ns <= t <= (a.end_ns or 0)), None)
        expected = None if linear is None else Cause("window", linear.tool_call, linear.seq)
        assert allowed.window(t, ended_ns=10**9) == expected, t


def test_the_tool_calls_kept_are_the_last_mentioned_and_bounded() -> None:
    from acp import schema

    from governor.gate.tool_calls import MAX_TOOL_CALLS, ToolCalls

    calls = ToolCalls()
    first = calls.upsert(schema.ToolCallStart(session_update="tool_call", tool_call_id="call-0", title="first"))
    first.governed = True
    for i in range(1, MAX_TOOL_CALLS + 50):
        calls.upsert(schema.ToolCallStart(session_update="tool_call", tool_call_id=f"call-{i}", title="t"))
        if i % 100 == 0:  # mentioned again: kept
            assert calls.upsert(schema.ToolCallProgress(session_update="tool_call_update", tool_call_id="call-0")) is first
    assert len(calls) == MAX_TOOL_CALLS
    assert calls.upsert(schema.ToolCallProgress(session_update="tool_call_update", tool_call_id="call-0")).governed
    assert not calls.upsert(schema.ToolCallProgress(session_update="tool_call_update", tool_call_id="call-1")).governed  # forgotten


def test_a_governed_write_explains_its_file_when_the_snapshot_also_hashed_it() -> None:
    # written just now, the file is racy: the snapshot holds its digest, the gate none
    hashed = evidence(current=Snapshot({WRITTEN: LEFT._replace(digest=b"sha")}))  # gate: none
    assert explain(Change(WRITTEN, "created", 100), hashed) == Cause("written")


def test_a_governed_write_changed_again_in_the_same_tick_is_told_by_its_content() -> None:
    # every field the kernel keeps equal (a coarse clock), the content not
    gate = {WRITTEN: LEFT._replace(digest=b"what the gate wrote")}
    later = evidence(written=gate, current=Snapshot({WRITTEN: LEFT._replace(digest=b"the agent's")}),
                     allowed=Allowances(), commands=[])  # fmt: skip
    assert explain(Change(WRITTEN, "changed", 100), later) is None
    same = evidence(written=gate, current=Snapshot({WRITTEN: gate[WRITTEN]}))
    assert explain(Change(WRITTEN, "changed", 100), same) == Cause("written")
