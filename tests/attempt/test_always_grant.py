"""A person's "always" covers what the governor knows a request does, never the
text the agent chose to show alone: a permission titled as the granted one but
naming other paths, or naming none with other input, is asked again, and so is
the same tool on the same paths under a title the person never saw; the same
title, tool and paths with other input (an edit's new text) is covered. The scripted agent over real
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
        *asking("c3", "Edit notes", "edit", ["{cwd}/notes.md"], {"file_path": "notes.md", "n": 2}),
        *asking("c6", "Tidy up", "edit", ["{cwd}/notes.md"], {"file_path": "notes.md"}),
        *asking("c4", "Look it up", "fetch", [], {"url": "https://example.org/a"}),
        *asking("c5", "Look it up", "fetch", [], {"url": "https://attacker.example/leak"}),
        {"say": "Done."},
    ]
    asked: list[str] = []

    def person(ask: Ask) -> str:
        asked.append(ask.subject)
        return "always" if len(asked) in (1, 4) else "refuse"  # c1 and c4

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
        "c3": [("allow", "grant")],  # the same title and tool on the same file, other input
        "c6": [("deny", "person")],  # another title: the person never saw it
        "c4": [("allow", "person")],
        "c5": [("deny", "person")],  # the same title, no paths, other input: asked again
    }, verdicts
    assert asked == ["Edit notes", "Edit notes", "Tidy up", "Look it up", "Look it up"]


def creating(value: str, secret: str) -> list[Any]:
    create = {"sessionId": "{session}", "command": "sh",
              "args": ["-c", 'printf %s "$MSG" > note.txt'], "cwd": "{cwd}", "outputByteLimit": 4096,
              "env": [{"name": "MSG", "value": value}, {"name": "TOKEN", "value": secret}]}  # fmt: skip
    return [{"request": "terminal/create", "params": create}, {"sleep": 1}]


async def test_a_commands_environment_is_part_of_its_request_shown_masked_and_never_recorded(
    tmp_path: Path,
) -> None:
    """What changes what a command does is part of the request a person decides:
    the same command line with another value in its environment is another
    request (another key), the person is shown each variable (a secret
    masked) and the output limit, and no value reaches the audit log."""
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    steps = [*creating("hello-7f3a", secret), *creating("other-9c2e", secret), {"say": "Done."}]
    asked: list[Ask] = []

    def person(ask: Ask) -> str:
        asked.append(ask)
        return "once"

    policy = parse_policy('capability = "edit-workspace"\n[ask]\ncommands = ["sh *"]\n', "p.toml")
    outcome = await run_attempt(scripted_spec(tmp_path, steps, approver=person, policy=policy))
    assert outcome.status == "completed", outcome.reason
    assert [a.kind for a in asked] == ["terminal", "terminal"]
    assert asked[0].subject == asked[1].subject and asked[0].key != asked[1].key
    shown = [a.detail["env"] for a in asked]
    assert shown[0][0] == "MSG=hello-7f3a" and shown[1][0] == "MSG=other-9c2e", shown
    assert all(secret not in pair and pair.startswith("TOKEN=") for e in shown for pair in e[1:])
    assert asked[0].detail["output_byte_limit"] == 4096
    text = Path(str(outcome.log)).read_text()
    assert secret not in text and "hello-7f3a" not in text and "other-9c2e" not in text
    assert (tmp_path / "ws" / "note.txt").read_text() == "other-9c2e"  # each ran as approved
