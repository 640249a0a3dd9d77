"""A line of the agent rejected at the wire leaves a trace: a ``wire`` record in
the audit chain (the method when it could be read, the length, why; never the
line's text), a count and a notice in the outcome, shown by ``governor audit``,
and the chain verifies. Real ``governor run --json`` through the console
script, the scripted agent writing its lines as they are."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

GOVERNOR = str(Path(sys.executable).parent / "governor")
SCRIPTED = Path(__file__).resolve().parent / "scripted_agent.py"

SECRET_TITLE = "write .git/hooks/pre-commit for token-7f3a"


def permission(session: str, number: str) -> str:
    """A ``session/request_permission`` line whose tool input holds ``number``
    as it is written (``NaN`` is no JSON number)."""
    return (
        '{"jsonrpc":"2.0","id":77,"method":"session/request_permission","params":'
        f'{{"sessionId":"{session}","toolCall":{{"toolCallId":"t1","title":"{SECRET_TITLE}",'
        f'"kind":"edit","rawInput":{{"mode":{number}}}}},'
        '"options":[{"optionId":"ok","name":"Allow","kind":"allow_once"},'
        '{"optionId":"no","name":"Reject","kind":"reject_once"}]}}'
    )


def run(tmp_path: Path, name: str, lines: list[str]) -> tuple[dict[str, Any], Path]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (tmp_path / "p.toml").write_text('capability = "edit-workspace"\n')
    script = tmp_path / f"{name}.json"
    script.write_text(json.dumps([*({"raw": line} for line in lines), {"sleep": 0.5}, {"say": "done"}]))
    log = tmp_path / f"{name}.jsonl"
    argv = [GOVERNOR, "run", "--json", "--workspace", str(ws), "--policy", str(tmp_path / "p.toml")]
    argv += ["--no-sandbox-agent", "--log", str(log), "play", "--"]
    argv += [sys.executable, str(SCRIPTED), "--script", str(script)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.stdout, done.stderr[-2000:]
    return json.loads(done.stdout), log


def audit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GOVERNOR, "audit", *args], capture_output=True, text=True, timeout=60)


def test_a_nan_permission_request_is_a_wire_record_counted_in_the_outcome_and_shown_by_audit(
    tmp_path: Path,
) -> None:
    outcome, log = run(tmp_path, "nan", [permission("{session}", "NaN")])
    assert outcome["status"] == "completed", outcome.get("reason")
    assert outcome["acp"]["rejected_lines"] == 1
    assert any(
        "1 line(s) rejected at the wire (naming session/request_permission)" in n
        for n in outcome["acp"]["notices"]
    ), outcome["acp"]["notices"]
    assert outcome["acp"]["tally"]["asked"] == 0  # it was never a request the gate decided
    text = log.read_text()
    assert SECRET_TITLE not in text and "NaN" not in text  # never the line's text
    [wire] = [r for r in map(json.loads, text.splitlines()) if r["kind"] == "wire"]
    assert wire["verdict"] == "deny" and wire["by"] == "protocol"
    assert wire["subject"]["method"] == "session/request_permission"
    assert wire["subject"]["length"] > len(SECRET_TITLE) and wire["subject"]["answered"] is True
    assert wire["subject"]["why"].startswith("not strict JSON")
    assert audit("verify", str(log)).returncode == 0
    refused = audit("--refused", str(log))
    assert refused.returncode == 0 and "wire" in refused.stdout, refused.stdout + refused.stderr
    assert "session/request_permission" in refused.stdout
    story = audit("--attempt", outcome["run_id"], str(log))
    assert story.returncode == 0 and " wire" in story.stdout, story.stdout + story.stderr


@pytest.mark.parametrize(
    ("line", "why", "method"),
    [
        ("this is not json", "not JSON", None),
        ("[1, 2]", "a batch", None),
        ('{"id": 3, "method": 7}', "method is not a string", None),
        ('{"id": [1], "method": "fs/read_text_file"}', "request id of a bad type", "fs/read_text_file"),
    ],
)
def test_every_line_the_reader_rejects_is_a_wire_record(
    tmp_path: Path, line: str, why: str, method: str | None
) -> None:
    outcome, log = run(tmp_path, "bad", [line])
    assert outcome["acp"]["rejected_lines"] == 1
    [wire] = [r for r in map(json.loads, log.read_text().splitlines()) if r["kind"] == "wire"]
    assert wire["subject"]["why"] == why and wire["subject"].get("method") == method
    assert wire["subject"]["length"] == len(line)
    assert audit("verify", str(log)).returncode == 0


def test_the_same_request_with_a_json_number_is_decided_and_leaves_no_wire_record(
    tmp_path: Path,
) -> None:
    outcome, log = run(tmp_path, "ok", [permission("{session}", "1")])
    assert outcome["acp"]["rejected_lines"] == 0
    assert not any("rejected at the wire" in n for n in outcome["acp"]["notices"])
    kinds = [r["kind"] for r in map(json.loads, log.read_text().splitlines())]
    assert "wire" not in kinds and "permission" in kinds
    assert outcome["acp"]["tally"]["asked"] == 1
