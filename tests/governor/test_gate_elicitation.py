"""An elicitation is governed like any request: a gate whose audit log broke
(failed closed) refuses it before the person sees the form; with a log that
works, the person fills it in and the answer follows its record."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import trio

from governor.acp.dispatch import begin, reply
from governor.audit.log import AuditLog
from governor.gate.approver import Approval, Ask
from governor.gate.gatekeeper import Gate
from governor.policies.policy import parse_policy

FORM = {
    "sessionId": "s1",
    "mode": "form",
    "message": "Name the project",
    "requestedSchema": {
        "type": "object",
        "properties": {"name": {"type": "string", "title": "Project name"}},
        "required": ["name"],
    },
}


class Person:
    """A person at the terminal who fills in every form (and refuses every ask)."""

    name = "person"

    def __init__(self) -> None:
        self.forms: list[str] = []

    async def __call__(self, ask: Ask) -> Approval:
        return "refuse"

    async def fill(self, message: str, fields: dict[str, Any]) -> dict[str, Any] | None:
        self.forms.append(message)
        return {"name": "demo"}


async def answer(gate: Gate, n: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    result = begin(gate.routes(), method, params)
    if inspect.isawaitable(result):
        result = await result
    decoded: dict[str, Any] = json.loads(reply(n, result))
    return decoded


def gate(tmp_path: Path, log: Path, person: Person) -> Gate:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "notes.txt").write_text("n\n")
    policy = parse_policy('capability = "edit-workspace"\n').bind(str(ws))
    governed = Gate(policy, AuditLog(log, "att"), person)
    governed.session_id = "s1"
    return governed


def test_with_a_working_log_the_person_fills_the_form_in_and_it_is_recorded(
    tmp_path: Path,
) -> None:
    person = Person()
    governed = gate(tmp_path, tmp_path / "audit.jsonl", person)
    answered = trio.run(answer, governed, 1, "elicitation/create", FORM)
    assert answered["result"] == {"action": "accept", "content": {"name": "demo"}}
    assert person.forms == ["Name the project"]
    (record,) = governed.audit.records
    assert record["kind"] == "elicitation"
    assert (record["verdict"], record["by"], record["option"]) == ("allow", "person", "accept")
    assert "demo" not in json.dumps(record)  # what the person typed is not logged
    governed.audit.close()


def test_a_gate_that_failed_closed_refuses_an_elicitation_and_never_shows_the_form(
    tmp_path: Path,
) -> None:
    person = Person()
    governed = gate(tmp_path, Path("/dev/full"), person)

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        read = {"sessionId": "s1", "path": str(tmp_path / "ws" / "notes.txt")}
        first = await answer(governed, 1, "fs/read_text_file", read)
        return first, await answer(governed, 2, "elicitation/create", FORM)

    first, elicited = trio.run(main)
    assert first["error"]["code"] == -32001  # the log broke here: the gate failed closed
    assert governed.failure is not None and "/dev/full" in governed.failure
    assert elicited["error"]["code"] == -32001 and "/dev/full" in elicited["error"]["message"]
    assert "result" not in elicited
    assert person.forms == []
    governed.audit.close()
