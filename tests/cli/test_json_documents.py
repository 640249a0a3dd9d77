"""Every ``--json`` document is one JSON object whose first key is ``status``
(issue 41): a script reads ``.status`` first whatever it asked, and a list (the
attempts, the refusals, a batch's jobs, the presets) sits under a key beside
it. A log that does not verify is said there (``unverified``, with the
problem), not only in a warning on stderr; `verify` says ``failed``.

Through the real console script, on a real attempt's log (the demo agent, its
commands in bubblewrap)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

GOVERNOR = str(Path(sys.executable).parent / "governor")
ROOT = Path(__file__).resolve().parents[2]


def _json(*args: str, code: int = 0) -> dict[str, Any]:
    done = subprocess.run([GOVERNOR, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == code, (args, done.stdout[-2000:], done.stderr[-2000:])
    doc = json.loads(done.stdout)
    assert isinstance(doc, dict) and next(iter(doc)) == "status", (args, done.stdout[:300])
    return doc


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("json-documents")
    workspace = root / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("hello\n")
    log = root / "audit.jsonl"
    ran = _json(
        "run", "--agent", "demo", "--workspace", str(workspace), "--log", str(log), "--json", "look"
    )
    assert ran["status"] == "completed", ran
    return log


@pytest.mark.parametrize(
    ("view", "key"),
    [
        ([], "attempts"),
        (["--refused"], "refusals"),
        (["--network"], "connections"),
        (["--checks"], "check_runs"),
        (["--mcp"], "mcp"),
    ],
)
def test_every_audit_view_is_an_object_with_its_status_and_its_list(
    log: Path, view: list[str], key: str
) -> None:
    doc = _json("audit", *view, "--json", str(log))
    assert doc["status"] == "ok" and isinstance(doc[key], list), doc
    if key == "attempts":
        assert doc[key][0]["status"] == "completed" and doc[key][0]["tally"]["asked"] >= 1, doc


def test_one_attempts_records_say_which_attempt_they_are(log: Path) -> None:
    attempt = _json("audit", "--json", str(log))["attempts"][0]["attempt"]
    doc = _json("audit", "--attempt", attempt, "--json", str(log))
    assert doc["attempt"] == attempt and doc["records"][-1]["kind"] == "attempt-end", doc


def test_verify_and_replay_have_a_status(log: Path) -> None:
    verified = _json("audit", "verify", "--json", str(log))
    assert verified["status"] == "ok" and verified["logs"][0]["intact"] is True, verified
    replayed = _json("audit", "replay", str(log), "--policy", "read-only", "--json")
    assert replayed["status"] == "ok" and len(replayed["replayed"]) == 1, replayed


def test_a_log_that_does_not_verify_is_said_in_the_document_not_only_on_stderr(
    log: Path, tmp_path: Path
) -> None:
    lines = log.read_text().splitlines(keepends=True)
    record = json.loads(lines[1])
    record["reason"] = "rewritten"  # an edited line: the chain breaks there
    forged = tmp_path / "forged.jsonl"
    forged.write_text("".join([lines[0], json.dumps(record) + "\n", *lines[2:]]))
    listed = _json("audit", "--json", str(forged))
    assert listed["status"] == "unverified", listed
    assert any("does not verify" in p for p in listed["problems"]), listed
    assert _json("audit", "--refused", "--json", str(forged))["status"] == "unverified"
    assert _json("audit", "verify", "--json", str(forged), code=1)["status"] == "failed"


def test_the_presets_and_the_agents_lists_are_objects_with_a_status() -> None:
    presets = _json("presets", "--json")
    assert presets["status"] == "ok" and "demo" in {p["id"] for p in presets["presets"]}, presets
    agents = _json("agents", "list", "--json")
    assert agents["status"] == "ok" and "claude" in {a["id"] for a in agents["agents"]}, agents
