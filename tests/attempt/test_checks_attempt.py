"""Checks after the attempt, for real: `governor run --check` with the scripted
agent over real pipes, each check in a real bwrap over the workspace as the
agent left it. A fixed test gives the verdict passed (exit 0), a test left
failing gives failed (exit 5); a check cannot change the workspace nor reach
the network, though the same write succeeds inside its own sandbox and the
same connection from the host; a frozen path stays read-only to checks."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from governor.checks.check_runs import run_checks
from governor.policies.policy import parse_policy

SCRIPTED = Path(__file__).resolve().parents[1] / "audit" / "scripted_agent.py"
GOVERNOR = str(Path(sys.executable).parent / "governor")
CHECK_PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "python3"
"""An interpreter every sandbox shows: the tests' own venv may lie under /tmp (a CI
clone), which a check's private /tmp hides, as it hides any folder of the host's
/tmp from the job's checks."""
PYTEST = f"{CHECK_PYTHON} tests/test_calc.py"
"""The job's test, as a check runs it: a plain script (pytest lives in the tests' venv)."""
BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TEST = (
    "import os, sys\nsys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))\n"
    "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
    "if __name__ == '__main__':\n    try:\n        test_add()\n    except AssertionError:\n"
    "        print('1 failed')\n        sys.exit(1)\n    print('1 passed')\n"
)


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "calc.py").write_text(BROKEN)
    (ws / "tests" / "test_calc.py").write_text(TEST)
    (ws / "conftest.py").write_text("import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\n")
    return ws


def _tree(ws: Path) -> dict[str, str]:
    """Every file of the workspace and its content's digest."""
    return {
        str(p.relative_to(ws)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(ws.rglob("*"))
        if p.is_file()
    }


def _run(tmp_path: Path, steps: list[object], *checks: str) -> subprocess.CompletedProcess[str]:
    ws = tmp_path / "ws"
    script = tmp_path / "script.json"
    script.write_text(json.dumps(steps))
    policy = tmp_path / "policy.toml"
    policy.write_text('capability = "edit-workspace"\n')
    argv = [GOVERNOR, "run", "--json", "--policy", str(policy), "--workspace", str(ws)]
    argv += ["--log", str(tmp_path / "audit.jsonl"), "--events", str(tmp_path / "events.jsonl")]
    argv += ["--no-sandbox-agent", *(a for c in checks for a in ("--check", c))]
    argv += ["play the script", "--", sys.executable, str(SCRIPTED), "--script", str(script)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180)


def _audit_checks(tmp_path: Path) -> str:
    done = subprocess.run(
        [GOVERNOR, "audit", "--checks", str(tmp_path / "audit.jsonl")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_agent_that_fixes_the_failing_test_gets_the_verdict_passed_and_exit_0(
    tmp_path: Path,
) -> None:
    ws = _workspace(tmp_path)
    steps = [{"write": "{cwd}/calc.py", "text": FIXED}, {"say": "fixed add"}]
    done = _run(tmp_path, steps, PYTEST)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "completed" and outcome["verdict"] == "passed"
    assert outcome["files_changed"] == [str(ws.resolve() / "calc.py")]
    [check] = outcome["checks_run"]
    assert check["command"] == PYTEST and check["exit"] == 0 and "1 passed" in check["tail"]
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    [event] = [e for e in events if e["type"] == "check"]
    assert event["verdict"] == "passed" and event["exit"] == 0
    listed = _audit_checks(tmp_path)
    assert "passed" in listed and PYTEST in listed and "1 passed, 0 failed" in listed
    # the check wrote no bytecode into the workspace
    assert not list(ws.rglob("__pycache__")) and (ws / "calc.py").read_text() == FIXED


def test_an_agent_that_leaves_the_test_failing_gets_the_verdict_failed_and_exit_5(
    tmp_path: Path,
) -> None:
    ws = _workspace(tmp_path)
    steps = [{"write": "{cwd}/notes.txt", "text": "looked at it\n"}, {"say": "done"}]
    done = _run(tmp_path, steps, PYTEST, "true")
    assert done.returncode == 5, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "completed" and outcome["verdict"] == "failed"
    failing, passing = outcome["checks_run"]
    assert failing["exit"] == 1 and "1 failed" in failing["tail"] and passing["exit"] == 0
    assert outcome["files_changed"] == [str(ws.resolve() / "notes.txt")]
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [r["verdict"] for r in records if r["kind"] == "check"] == ["failed", "passed"]
    assert records[-1]["kind"] == "attempt-end" and records[-1]["verdict"] == "failed"
    assert "1 passed, 1 failed" in _audit_checks(tmp_path)


@pytest.fixture
def listener() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server, server.getsockname()[1]  # type: ignore[misc]
    server.close()


async def test_a_check_cannot_change_the_workspace_nor_reach_the_network(
    tmp_path: Path, listener: tuple[socket.socket, int]
) -> None:
    ws = _workspace(tmp_path)
    _, port = listener
    before = _tree(ws)
    write = "echo gone > calc.py && rm tests/test_calc.py && touch made.txt && cat calc.py"
    connect = f"{CHECK_PYTHON} -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3)\""
    policy = parse_policy(
        f'capability = "edit-workspace"\nnetwork = true\n[checks]\ncommands = [{json.dumps(write)}, {json.dumps(connect)}]\n',
        "loop.toml",
    ).bind(str(ws))
    result = await run_checks(policy)
    wrote, connected = result.runs
    # the write succeeds inside the check's own sandbox, and is thrown away with it
    assert wrote.exit == 0 and wrote.tail == "gone\n"
    assert result.workspace == "overlay" and _tree(ws) == before
    # the policy's network is on, but not for a check; the host reaches the same port
    assert connected.exit != 0 and "Error" in connected.tail
    socket.create_connection(("127.0.0.1", port), 3).close()
    assert result.verdict == "failed"
    # the same write by the job's own hand changes the workspace
    (ws / "calc.py").write_text("gone\n")
    assert _tree(ws) != before


async def test_a_frozen_path_stays_read_only_to_a_check(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    before = _tree(ws)
    policy = parse_policy(
        'capability = "edit-workspace"\n[sandbox]\nfrozen = ["tests/**"]\n[checks]\n'
        'commands = ["echo pass >> tests/test_calc.py", "echo x >> calc.py"]\n',
        "loop.toml",
    ).bind(str(ws))
    frozen, beside = (await run_checks(policy)).runs
    assert frozen.exit != 0 and "Read-only file system" in frozen.tail
    assert beside.exit == 0, "beside the frozen path the check writes (to its overlay)"
    assert _tree(ws) == before


def test_checks_are_skipped_by_nothing_but_a_job_without_any(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    policy = parse_policy('capability = "read-only"\n', "plain.toml").bind(str(ws))
    result = trio.run(run_checks, policy)
    assert result.runs == () and result.verdict is None
    named = trio.run(lambda: run_checks(policy, commands=("test -f calc.py",)))
    assert named.verdict == "passed" and os.path.exists(ws / "calc.py")
