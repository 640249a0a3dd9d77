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


SCRIPTED = Path(__file__).resolve().parents[1] / "audit" / "scripted_agent.py"


def converse(argv: list[str], turns: list[tuple[str, str]], timeout: float = 60) -> tuple[int, str]:
    """Run argv on a pty; each time the screen shows the next marker, type its answer."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(argv[0], argv)
    screen = b""
    pending = list(turns)
    seen = 0  # where the next marker is looked for
    deadline = time.monotonic() + timeout
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
            while pending and (at := screen.find(pending[0][0].encode(), seen)) >= 0:
                seen = at + len(pending[0][0])
                os.write(fd, pending.pop(0)[1].encode() + b"\n")
        done, code = os.waitpid(pid, os.WNOHANG)
        if done:
            status = code
            break
    if status is None:
        _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), screen.decode(errors="replace")


def drive(argv: list[str], answers: list[str], timeout: float = 60) -> tuple[int, str]:
    """Run argv on a pty; answer each approval question in turn; return (exit, screen)."""
    return converse(argv, [("or [r]efuse?", answer) for answer in answers], timeout)


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
    assert "the agent asks permission for a tool call" in screen
    assert "title (the agent's): Write hello.py" in screen
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


def test_a_person_fills_in_the_form_an_agent_sends(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    received = tmp_path / "received.jsonl"
    form = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Project name"},
            "level": {"type": "string", "title": "Level", "enum": ["low", "high"]},
            "tests": {"type": "boolean", "title": "Add tests?"},
            "count": {"type": "integer", "title": "How many"},
        },
    }
    script = [
        {
            "request": "elicitation/create",
            "params": {"sessionId": "{session}", "mode": "form", "message": "Set up the project",
                       "requestedSchema": form},
        },
        {"say": "Done."},
    ]  # fmt: skip
    (tmp_path / "script.json").write_text(json.dumps(script))
    argv = [
        str(GOVERNOR),
        "run",
        "--workspace",
        str(ws),
        "--approvals",
        "person",
        "--no-sandbox-agent",
    ]
    argv += ["--log", str(tmp_path / "audit.jsonl"), "--json", "go"]
    argv += ["--", sys.executable, str(SCRIPTED), "--script", str(tmp_path / "script.json")]
    argv += ["--received", str(received)]
    turns = [
        ("or [d]ecline? ", "f"),
        ("Project name (string): ", "hello-app"),
        ("Level (string, one of: low, high): ", "medium"),  # not offered: asked again
        ("not a valid string, one of: low, high", "high"),
        ("Add tests? (boolean): ", "y"),
        ("How many (integer): ", "3"),
    ]
    code, screen = converse(argv, turns)
    assert code == 0, screen
    assert "the agent asks for input (its words): Set up the project" in screen
    lines = [json.loads(line) for line in received.read_text().splitlines()]
    (init,) = [line for line in lines if line["method"] == "initialize"]
    assert init["capabilities"]["elicitation"] == {"form": {}}
    (answered,) = [line for line in lines if line["method"] == "elicitation/create"]
    assert answered["result"] == {
        "action": "accept",
        "content": {"name": "hello-app", "level": "high", "tests": True, "count": 3},
    }
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    (record,) = [r for r in records if r["kind"] == "elicitation"]
    assert (record["verdict"], record["by"]) == ("allow", "person")
    assert record["option"] == "accept"
    assert record["subject"]["fields"] == ["name", "level", "tests", "count"]
    assert "hello-app" not in json.dumps(record)  # what the person typed is not logged


def test_a_yes_once_is_one_question_for_the_demos_command(tmp_path: Path) -> None:
    # the permission for `python3 hello.py` and its terminal/create are one action
    _, screen, outcome = run_demo_as_a_person(
        tmp_path, 'capability = "edit-workspace"\n[ask]\ncommands = ["python3 *"]\n', ["o"]
    )
    assert screen.count("or [r]efuse?") == 1
    assert outcome["status"] == "completed"
    yes = next(r for r in outcome["tool_calls"] if r["kind"] == "permission" and r["by"] == "person")
    carried = [r for r in outcome["tool_calls"] if r["kind"] == "terminal" and r["by"] == "grant"]
    assert carried and f"allowed by a person (seq {yes['seq']})" in carried[0]["reason"]
    assert outcome["acp"]["tally"]["waited"] == 1


def test_after_a_persons_once_then_always_the_tally_reads_as_its_words_say(tmp_path: Path) -> None:
    # o for the write's permission, a for the command's; the command's terminal call
    # is covered by that "always" (a grant); the git hook is refused (protected)
    policy = 'capability = "edit-workspace"\n[ask]\ntools = ["edit"]\ncommands = ["python3 *"]\n'
    _, screen, outcome = run_demo_as_a_person(tmp_path, policy, ["o", "a"])
    assert screen.count("or [r]efuse?") == 2
    tally = outcome["acp"]["tally"]
    assert tally == {"asked": 6, "allowed": 5, "waited": 2, "refused": 1, "failed": 0, "reported": 0,
                     "unasked": 1}  # fmt: skip
    by_request: dict[int, set[str]] = {}
    for r in outcome["tool_calls"]:
        if r["kind"] in ("permission", "read", "write", "terminal"):
            by_request.setdefault(r["request"], set()).add(r["by"])
    waited = [n for n, bys in by_request.items() if "person" in bys]
    refused = {r["request"] for r in outcome["tool_calls"] if r.get("verdict") == "deny"}
    assert len(by_request) == tally["asked"] and len(waited) == tally["waited"]
    assert len(refused) == tally["refused"] and tally["allowed"] == tally["asked"] - len(refused)
    assert any(bys == {"grant"} for bys in by_request.values())  # allowed, not a wait
    (hook,) = refused
    assert by_request[hook] == {"protected"}
