"""`--approvals person`: a person at a real pseudo-terminal answers the asks."""

from __future__ import annotations

import json
import os
import pty
import select
import sys
import time
from pathlib import Path

GOVERNOR = Path(sys.executable).parent / "governor"


def drive(argv: list[str], answers: list[str], timeout: float = 60) -> tuple[int, str]:
    """Run argv on a pty; answer each approval question in turn; return (exit, screen)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: its controlling terminal is the pty
        os.execv(argv[0], argv)
    screen = b""
    pending = list(answers)
    deadline = time.monotonic() + timeout
    asked = 0
    status = None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            screen += chunk
            if screen.count(b"or [r]efuse?") > asked and pending:
                asked += 1
                os.write(fd, pending.pop(0).encode() + b"\n")
        done, code = os.waitpid(pid, os.WNOHANG)
        if done:
            status = code
            break
    if status is None:
        _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), screen.decode(errors="replace")


def run_demo_as_a_person(tmp_path: Path, policy: str, answers: list[str]) -> tuple[int, str, dict]:
    """`governor run --approvals person` on the demo agent in a pty, answering in turn;
    returns the exit code, the screen and the outcome JSON."""
    ws = tmp_path / "ws"
    ws.mkdir()
    policy_file = tmp_path / "p.toml"
    policy_file.write_text(policy)
    argv = [str(GOVERNOR), "run", "--agent", "demo", "--policy", str(policy_file)]
    argv += ["--workspace", str(ws), "--approvals", "person"]
    argv += ["--log", str(tmp_path / "audit.jsonl"), "--json", "do it"]
    code, screen = drive(argv, answers=answers)
    assert code == 0, screen
    outcome = json.loads(screen[screen.index('{\r\n  "status"') :].replace("\r\n", "\n"))
    return code, screen, outcome


def test_a_person_allows_once_then_refuses_and_both_are_recorded_as_a_persons(
    tmp_path: Path,
) -> None:
    _, screen, outcome = run_demo_as_a_person(
        tmp_path, 'capability = "edit-workspace"\n[ask]\ntools = ["edit", "execute"]\n', ["o", "r"]
    )
    assert "the agent asks: permission: Write hello.py" in screen
    assert "content to write" not in screen or "hello" in screen
    by = [
        (r["subject"].get("title"), r["verdict"], r["by"])
        for r in outcome["tool_calls"]
        if r["kind"] == "permission"
    ]
    assert ("Write hello.py", "allow", "person") in by
    assert ("Run `python3 hello.py`", "deny", "person") in by
    assert outcome["acp"]["tally"]["waited"] == 2
    assert (tmp_path / "ws" / "hello.py").exists()


def test_allow_for_the_rest_of_the_attempt_becomes_a_grant(tmp_path: Path) -> None:
    _, screen, outcome = run_demo_as_a_person(
        tmp_path, 'capability = "edit-workspace"\n[ask]\ncommands = ["python3 *"]\n', ["a"]
    )
    assert screen.count("or [r]efuse?") == 1  # the terminal/create of the same command was granted
    bys = [r["by"] for r in outcome["tool_calls"] if r["kind"] in ("permission", "terminal")]
    assert "person" in bys and "grant" in bys  # asked once, then covered by the grant
