"""``elicitation/create`` unattended: not advertised, declined, and recorded first."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "audit"))

from audit_helpers import scripted_spec

from governor.attempt.lifecycle import run_attempt
from governor.audit.reading import decision_records

SECRET = "sk-live-0123456789abcdefghij"


def elicit(message: str) -> dict[str, Any]:
    return {
        "request": "elicitation/create",
        "params": {
            "sessionId": "{session}",
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "title": "Project name"},
                    "tests": {"type": "boolean", "title": "Add tests?"},
                },
                "required": ["name"],
            },
        },
    }


async def test_unattended_an_elicitation_is_declined_recorded_and_never_advertised(
    tmp_path: Path,
) -> None:
    received = tmp_path / "received.jsonl"
    steps = [elicit(f"Name the project (token {SECRET})"), {"say": "Done."}]
    outcome = await run_attempt(
        scripted_spec(
            tmp_path, steps, received=received, environ={"PATH": "/usr/bin", "API_TOKEN": SECRET}
        )
    )
    assert outcome.status == "completed", outcome.reason
    lines = [json.loads(line) for line in received.read_text().splitlines()]
    (init,) = [line for line in lines if line["method"] == "initialize"]
    assert "elicitation" not in init["capabilities"]
    (answered,) = [line for line in lines if line["method"] == "elicitation/create"]
    assert answered["result"] == {"action": "decline"} and answered["error"] is None
    (record,) = [
        r for r in decision_records(outcome.log, outcome.run_id) if r["kind"] == "elicitation"
    ]
    assert (record["verdict"], record["by"]) == ("deny", "unattended")
    assert record["subject"]["fields"] == ["name", "tests"]
    assert record["option"] == "decline"
    assert SECRET not in json.dumps(record) and "[secret]" in record["subject"]["message"]
    assert outcome.acp is not None and outcome.acp.tally.refused == 1
    log = (tmp_path / "audit.jsonl").read_text()
    assert SECRET not in log


async def test_replay_under_another_policy_keeps_the_elicitation_as_it_was(
    tmp_path: Path, capsys: Any
) -> None:
    from governor import cli

    steps = [elicit("Name the project"), {"say": "Done."}]
    await run_attempt(scripted_spec(tmp_path, steps))
    stricter = tmp_path / "read-only.toml"
    stricter.write_text('capability = "read-only"\n')
    log = str(tmp_path / "audit.jsonl")
    assert cli.main(["audit", "replay", log, "--policy", str(stricter), "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["replayed"]
    assert result["unaffected"] == 1 and result["changes"] == [] and result["skipped"] == []
    assert cli.main(["audit", "replay", log, "--policy", str(stricter)]) == 0
    assert "1 decision(s) no policy makes" in capsys.readouterr().out


async def test_an_unknown_request_is_answered_method_not_found_and_noticed_once(
    tmp_path: Path,
) -> None:
    received = tmp_path / "received.jsonl"
    drain = {"request": "craft/drainMidTurnQueue", "params": {"sessionId": "{session}"}}
    steps = [drain, drain, drain, {"request": "_vendor/x", "params": {}}, {"say": "Done."}]
    outcome = await run_attempt(scripted_spec(tmp_path, steps, received=received))
    assert outcome.status == "completed", outcome.reason
    answers = [json.loads(line) for line in received.read_text().splitlines()]
    assert [a["error"] for a in answers if a["method"] != "initialize"] == [-32601] * 4
    assert outcome.acp is not None
    noticed = [n for n in outcome.acp.notices if "a method the governor does not know" in n]
    assert noticed == [
        "scripted sent 3 request(s) of craft/drainMidTurnQueue, a method the governor does not know; each was answered -32601",
        "scripted sent 1 request(s) of _vendor/x, a method the governor does not know; each was answered -32601",
    ]
