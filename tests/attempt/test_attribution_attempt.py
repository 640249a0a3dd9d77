"""An agent that asks, is allowed, and then does the work itself: what it changes
under the allowed permission is explained by it; what it changes after is unasked."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "audit"))

from audit_helpers import scripted_spec

from governor.attempt.lifecycle import run_attempt
from governor.audit.reading import decision_records


def permission(call: str, command: str) -> list[dict[str, Any]]:
    return [
        {
            "update": {
                "sessionUpdate": "tool_call",
                "toolCallId": call,
                "title": command,
                "kind": "execute",
                "status": "pending",
                "rawInput": {"command": command},
            }
        },
        {
            "request": "session/request_permission",
            "params": {
                "sessionId": "{session}",
                "toolCall": {"toolCallId": call, "rawInput": {"command": command}},
                "options": [
                    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
                ],
            },
        },
    ]


def done(call: str) -> dict[str, Any]:
    return {
        "update": {"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "completed"}
    }


async def test_what_an_allowed_call_does_is_explained_and_a_later_write_is_unasked(
    tmp_path: Path,
) -> None:
    steps = [
        *permission("c1", "make-report > {cwd}/report.txt"),
        {"write": "{cwd}/report.txt", "text": "named by the redirect\n"},
        {"write": "{cwd}/side.txt", "text": "not named, written while c1 runs\n"},
        done("c1"),
        {"sleep": 0.05},
        {"write": "{cwd}/late.txt", "text": "after c1 completed\n"},
        {"say": "Done."},
    ]
    outcome = await run_attempt(scripted_spec(tmp_path, steps))
    assert outcome.status == "completed", outcome.reason
    records = {
        r["subject"]["path"].rsplit("/", 1)[-1]: r
        for r in decision_records(outcome.log, outcome.run_id)
        if r["kind"] in ("changed", "unasked")
    }
    decided = [
        r for r in decision_records(outcome.log, outcome.run_id) if r["kind"] == "permission"
    ]
    assert {r["verdict"] for r in decided} == {"allow"}  # one record per part of the line
    allowed = decided[-1]  # the seq an explanation names: the decision's last record
    report, side, late = records["report.txt"], records["side.txt"], records["late.txt"]
    assert report["kind"] == "changed"
    assert report["explained_by"] == {"rule": "named", "tool_call": "c1", "seq": allowed["seq"]}
    assert side["kind"] == "changed"
    assert side["explained_by"] == {"rule": "window", "tool_call": "c1", "seq": allowed["seq"]}
    assert late["kind"] == "unasked" and "explained_by" not in late
    assert outcome.acp is not None
    assert outcome.acp.unasked == 1 and outcome.acp.unasked_paths == [
        str(tmp_path / "ws" / "late.txt")
    ]
    assert outcome.acp.tally.reported == 2


async def test_a_refused_call_explains_nothing_it_does_anyway(tmp_path: Path) -> None:
    steps = [
        *permission("c1", "rm -rf {cwd}/keep"),
        {"write": "{cwd}/done-anyway.txt", "text": "refused, done anyway\n"},
        done("c1"),
        {"say": "Done."},
    ]
    policy = 'capability = "edit-workspace"\n[deny]\ncommands = ["rm *"]\n'
    (tmp_path / "p.toml").write_text(policy)
    outcome = await run_attempt(scripted_spec(tmp_path, steps, policy=tmp_path / "p.toml"))
    assert "deny" in {
        r["verdict"]
        for r in decision_records(outcome.log, outcome.run_id)
        if r["kind"] == "permission"
    }
    assert outcome.acp is not None and outcome.acp.unasked_paths == [
        str(tmp_path / "ws" / "done-anyway.txt")
    ]


async def test_a_change_the_agent_made_itself_carries_its_diff_from_the_start_where_it_was_kept(
    tmp_path: Path,
) -> None:
    """The start side comes from what the attempt's start kept (source and test
    files): a changed and a deleted source file and a created file carry their
    diff; a text file that is no source (its start not kept) and a binary one
    carry none, rather than a diff against nothing."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.js").write_text("export const add = (a, b) => a - b;\n")
    (ws / "gone.py").write_text("x = 1\n")
    (ws / "notes.txt").write_text("before\n")
    steps = [
        {"write": "{cwd}/calc.js", "text": "export const add = (a, b) => a + b;\n"},
        {"shell": "rm {cwd}/gone.py; printf 'a\\0b' > {cwd}/blob.bin"},
        {"write": "{cwd}/notes.txt", "text": "after\n"},
        {"write": "{cwd}/new.md", "text": "fresh\n"},
        {"say": "Done."},
    ]
    outcome = await run_attempt(scripted_spec(tmp_path, steps))
    assert outcome.status == "completed", outcome.reason
    diffs = {
        r["subject"]["path"].rsplit("/", 1)[-1]: r.get("diff")
        for r in decision_records(outcome.log, outcome.run_id)
        if r["kind"] == "unasked" and "path" in r["subject"]
    }
    assert set(diffs) == {"calc.js", "gone.py", "notes.txt", "new.md", "blob.bin"}, diffs
    assert "-export const add = (a, b) => a - b;" in diffs["calc.js"]
    assert "+export const add = (a, b) => a + b;" in diffs["calc.js"]
    assert "-x = 1" in diffs["gone.py"] and "+" not in diffs["gone.py"].split("@@")[-1]
    assert diffs["new.md"].startswith("--- /dev/null") and "+fresh" in diffs["new.md"]
    assert diffs["notes.txt"] is None and diffs["blob.bin"] is None
