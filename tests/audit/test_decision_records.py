"""An outcome names where its decision log is (the log's path, the attempt's id,
the count), and its records are read from the file one at a time: its own
attempt's only, in order, as written; ``--json`` streams them as ``tool_calls``
in the text ``json.dumps`` of the whole document would give."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from audit_helpers import demo_attempts, records
from hypothesis import given, settings
from hypothesis import strategies as st

from governor.audit.reading import LogUnreadable, decision_records
from governor.cli.outcome_json import Streamed, document, write_json
from governor.ending.outcome import Outcome


def decisions_in(log: Path, attempt: str) -> list[dict[str, Any]]:
    return [
        r
        for r in records(log)
        if r["attempt"] == attempt and r["kind"] not in ("attempt-start", "attempt-end")
    ]


async def test_an_outcome_holds_where_its_records_are_and_they_are_its_attempts_own(
    tmp_path: Path,
) -> None:
    log, (first, second) = await demo_attempts(tmp_path, 2)
    assert first.log == second.log == str(log)
    for outcome in (first, second):
        logged = decisions_in(log, outcome.run_id)
        assert outcome.decisions == len(logged) > 0
        assert list(decision_records(outcome.log, outcome.run_id)) == logged
        assert list(decision_records(outcome.log, outcome.run_id, outcome.decisions)) == logged
    assert "tool_calls" not in first.to_json()  # values only: the log holds the records


async def test_the_streamed_json_is_the_text_json_dumps_gives_for_the_whole_outcome(
    tmp_path: Path,
) -> None:
    log, (outcome,) = await demo_attempts(tmp_path, 1)
    whole: dict[str, Any] = {}  # the document as the outcome once held it, all in memory
    for key, value in outcome.to_json().items():
        whole[key] = value
        if key == "status":
            whole["exit_code"] = 0
        if key == "run_id":
            whole["tool_calls"] = decisions_in(log, outcome.run_id)
    keys = list(document(outcome, 0))
    assert keys[:3] == ["status", "exit_code", "summary"]
    assert keys[keys.index("run_id") + 1] == "tool_calls"
    for indent in (2, None):
        out = io.StringIO()
        write_json(document(outcome, 0), out, indent=indent)
        assert out.getvalue() == json.dumps(whole, indent=indent, ensure_ascii=False)
        assert json.loads(out.getvalue())["tool_calls"] == decisions_in(log, outcome.run_id)


def test_streamed_arrays_empty_or_nested_are_laid_out_as_json_dumps_lays_them_out() -> None:
    for indent in (2, None):
        for items in ([], [{}], [1, {"a": [1, 2], "b": "é\n"}], [[], "x"]):
            value = {"v": 1, "outer": {"n": None, "s": Streamed(iter(items)), "e": {}}}
            plain = {"v": 1, "outer": {"n": None, "s": items, "e": {}}}
            out = io.StringIO()
            write_json(value, out, indent=indent)
            assert out.getvalue() == json.dumps(plain, indent=indent, ensure_ascii=False)


JSON_TEXT = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e-4, 9.9e-5, 1e-5, 1e-7, 5e-324, 1e16, 1e-4 - 1e-20, -0.0, 0.0])
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
).map(lambda value: orjson.loads(orjson.dumps(value)))
"""Values as a record read from a log is: parsed from JSON text (by orjson)."""


@settings(max_examples=400, deadline=None)
@given(st.lists(JSON_TEXT, max_size=4))
def test_streamed_records_are_the_text_json_dumps_gives_whatever_they_hold(
    items: list[Any],
) -> None:
    # every float spelling, every character, strings holding "e-" and "0.0000"
    value = {"tool_calls": Streamed(iter(items)), "n": len(items)}
    out = io.StringIO()
    write_json(value, out, indent=2)
    assert out.getvalue() == json.dumps(
        {"tool_calls": items, "n": len(items)}, indent=2, ensure_ascii=False
    )


def test_torn_and_foreign_lines_are_skipped_and_the_count_stops_the_read(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    lines = [
        {"seq": 1, "attempt": "a", "kind": "attempt-start"},
        {"seq": 2, "attempt": "a", "kind": "read", "verdict": "allow"},
        {"seq": 1, "attempt": "b", "kind": "read", "verdict": "deny"},
        {"seq": 3, "attempt": "a", "kind": "write", "verdict": "deny"},
        {"seq": 4, "attempt": "a", "kind": "attempt-end"},
    ]
    text = "\n".join(json.dumps(line) for line in lines)
    log.write_text(
        text.replace('{"seq": 1, "attempt": "b"', '{"torn\n{"seq": 1, "attempt": "b"') + "\n"
    )
    assert [r["seq"] for r in decision_records(log, "a")] == [2, 3]
    assert [r["seq"] for r in decision_records(log, "a", 1)] == [2]
    assert [r["attempt"] for r in decision_records(log, "b")] == ["b"]
    assert list(decision_records(None, "a")) == [] and list(decision_records(log, "a", 0)) == []


def test_a_log_that_is_gone_is_an_error_naming_it(tmp_path: Path) -> None:
    gone = tmp_path / "moved-away.jsonl"
    outcome = Outcome("completed", run_id="a", log=str(gone), decisions=3)
    with pytest.raises(LogUnreadable, match=re.escape(f"{gone}: cannot read the log")):
        list(decision_records(outcome.log, outcome.run_id, outcome.decisions))
