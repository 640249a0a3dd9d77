"""Every bad input to `governor run` is refused before anything starts, through
the real `governor` script: exit 2, every problem at once, each naming the
culprit and the fix, no audit log written; and the neighbouring good input runs.
With ``--json`` stdout holds one JSON object even then."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

GOVERNOR = str(Path(sys.executable).parent / "governor")
DEMO = str(Path(__file__).resolve().parents[2] / "governor" / "agents" / "demo.py")
EDIT = str(Path(__file__).resolve().parents[2] / "policies" / "edit-workspace.toml")


def governor(*args: str, stdin: str | None = "") -> subprocess.CompletedProcess[str]:
    """`governor` with no controlling terminal (a new session), as on a CI runner."""
    return subprocess.run(
        [GOVERNOR, *args],
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
        env=os.environ,
        start_new_session=True,
    )


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    return w


def demo(
    ws: Path, *extra: str, prompt: str = "the task", stdin: str | None = ""
) -> subprocess.CompletedProcess[str]:
    """The demo agent (an argv after --) at edit-workspace, its log beside the workspace."""
    return governor(
        *("run", "--policy", EDIT, "--workspace", str(ws), "--log", str(ws.parent / "audit.jsonl")),
        *extra,
        prompt,
        *("--", sys.executable, DEMO),
        stdin=stdin,
    )


def refused(done: subprocess.CompletedProcess[str], ws: Path, *messages: str) -> None:
    """Exit 2, each message a line of its own on stderr, no traceback, nothing ran."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    for message in messages:
        assert f"governor: {message}" in lines, (message, done.stderr)
    assert not (ws.parent / "audit.jsonl").exists()
    assert not (ws / "hello.py").exists()


def test_an_unknown_preset_is_named_with_the_presets_not_blamed_on_the_ceiling(ws: Path) -> None:
    done = governor(
        "run",
        "--agent",
        "nosuch",
        "--workspace",
        str(ws),
        "--log",
        str(ws.parent / "audit.jsonl"),
        "t",
    )
    assert done.returncode == 2
    assert "governor: no agent `nosuch` (claude, codex, gemini" in done.stderr
    assert "give --agent one of these presets, or an ACP command after --" in done.stderr
    assert "ceiling" not in done.stderr
    ran = governor(
        "run",
        "--agent",
        "demo",
        "--policy",
        EDIT,
        "--workspace",
        str(ws),
        "--log",
        str(ws.parent / "ok.jsonl"),
        "t",
    )
    assert ran.returncode == 0, ran.stderr


@pytest.mark.parametrize("timeout", ["-5", "0", "nan", "inf"])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused_and_a_positive_one_runs(
    ws: Path, timeout: str
) -> None:
    done = demo(ws, "--timeout", timeout)
    refused(done, ws)
    assert (
        f"the timeout {float(timeout):g} is not a number of seconds above 0: give --timeout a positive number"
        in done.stderr
    )
    assert len(done.stderr.splitlines()) == 1, done.stderr
    ran = demo(ws, "--timeout", "60")
    assert ran.returncode == 0, ran.stderr


def test_a_blank_prompt_or_an_empty_stdin_is_refused_and_a_real_one_runs(ws: Path) -> None:
    refused(
        demo(ws, prompt="   "),
        ws,
        "the PROMPT argument is empty or only whitespace: give the agent a task",
    )
    refused(
        demo(ws, prompt="-", stdin=""),
        ws,
        "the prompt read from stdin (-) is empty or only whitespace: give the agent a task",
    )
    empty = ws.parent / "task.txt"
    empty.write_text("\n \n")
    refused(
        demo(ws, "--prompt-file", str(empty), prompt="-"),
        ws,
        "give the task once: a PROMPT argument or --prompt-file FILE, not both",
    )
    ran = demo(ws, prompt="-", stdin="write hello\n")
    assert ran.returncode == 0, ran.stderr


def test_an_audit_log_under_a_file_is_refused_naming_the_file_and_one_in_a_new_folder_is_made(
    ws: Path,
) -> None:
    a_file = ws.parent / "a-file"
    a_file.write_text("")
    done = governor(
        "run",
        "--policy",
        EDIT,
        "--workspace",
        str(ws),
        "--log",
        f"{a_file}/log.jsonl",
        "t",
        "--",
        sys.executable,
        DEMO,
    )
    refused(
        done,
        ws,
        f"the audit log {a_file}/log.jsonl cannot be made: {a_file} is not a directory; give --log a path under a directory",
    )
    assert "File exists" not in done.stderr
    log = ws.parent / "new" / "log.jsonl"
    ran = governor(
        "run",
        "--policy",
        EDIT,
        "--workspace",
        str(ws),
        "--log",
        str(log),
        "t",
        "--",
        sys.executable,
        DEMO,
    )
    assert ran.returncode == 0 and log.exists(), ran.stderr


def test_json_and_events_on_stdout_are_refused_together_and_events_to_a_file_keep_json(
    ws: Path,
) -> None:
    refused(
        demo(ws, "--json", "--events", "-"),
        ws,
        "--json and --events - both want stdout: give --events a file (--events FILE) or drop --json",
    )
    events = ws.parent / "events.jsonl"
    ran = demo(ws, "--json", "--events", str(events))
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["status"] == "completed"
    assert json.loads(events.read_text().splitlines()[-1])["type"] == "outcome"


def test_approvals_by_a_person_with_no_terminal_are_refused_and_pause_is_taken(ws: Path) -> None:
    refused(
        demo(ws, "--approvals", "person"),
        ws,
        "--approvals person needs a terminal to ask at, and this process has none: use --approvals pause (end the attempt needs_approval) or unattended (refuse)",
    )
    ran = demo(ws, "--approvals", "pause")
    assert ran.returncode in (0, 4), ran.stderr


def test_every_problem_of_the_command_line_and_the_job_is_reported_in_one_round(ws: Path) -> None:
    done = governor(
        *("run", "--policy", EDIT, "--workspace", str(ws.parent / "gone")),
        *("--log", str(ws.parent / "audit.jsonl"), "--json", "--events", "-", "--timeout", "-1"),
        *("--fail-on", "refused,warnings", "--approvals", "person", "--env", "GOVTEST_UNSET_VAR"),
        " ",
        *("--", sys.executable, DEMO),
    )
    refused(
        done,
        ws,
        "--json and --events - both want stdout: give --events a file (--events FILE) or drop --json",
        "--approvals person needs a terminal to ask at, and this process has none: use --approvals pause (end the attempt needs_approval) or unattended (refuse)",
        "--fail-on 'refused,warnings': 'warnings' is not accepted (accepted: refused, unasked, comma-separated)",
        "the PROMPT argument is empty or only whitespace: give the agent a task",
        "the timeout -1 is not a number of seconds above 0: give --timeout a positive number (or leave it out for the policy's [limits] wall)",
        "required environment variables are unset or empty: GOVTEST_UNSET_VAR",
        f"the workspace does not exist or is not a directory: {ws.parent / 'gone'}",
    )
    assert "the prompt is empty" not in done.stderr  # said once, naming where it came from
    doc = json.loads(done.stdout)
    assert doc["refused_before_start"] is True and doc["exit_code"] == 2
    assert doc["status"] == "refused_before_start"  # a script reading .status gets a word
    assert doc["problems"] == [line.removeprefix("governor: ") for line in done.stderr.splitlines()]


def test_with_json_a_refusal_before_start_is_a_json_object_on_stdout_and_without_stdout_is_empty(
    ws: Path,
) -> None:
    with_json = demo(ws, "--json", "--timeout", "0")
    refused(with_json, ws)
    assert json.loads(with_json.stdout) == {
        "status": "refused_before_start",
        "refused_before_start": True,
        "exit_code": 2,
        "problems": [
            "the timeout 0 is not a number of seconds above 0: give --timeout a positive number (or leave it out for the policy's [limits] wall)"
        ],
    }
    without = demo(ws, "--timeout", "0")
    refused(without, ws)
    assert without.stdout == ""


def test_fail_on_makes_a_completed_attempt_with_a_refusal_or_an_unasked_change_exit_5(
    ws: Path,
) -> None:
    # the demo agent is refused a git hook and writes NOTES.md without asking
    plain = demo(ws, "--json")
    assert plain.returncode == 0, plain.stderr
    tally = json.loads(plain.stdout)["acp"]["tally"]
    assert tally["refused"] == 1 and tally["unasked"] == 1
    for words in ("refused", "unasked", "refused,unasked"):
        (ws / "hello.py").unlink(missing_ok=True)
        (ws / "NOTES.md").unlink(missing_ok=True)
        done = demo(ws, "--json", "--fail-on", words)
        assert done.returncode == 6, (words, done.stderr)
        assert json.loads(done.stdout)["status"] == "completed"
        said = {"refused": "1 request(s) refused", "unasked": "1 change(s) made without asking"}
        expected = " and ".join(said[w] for w in words.split(","))
        assert f"governor: --fail-on {words}: the attempt completed with {expected}" in done.stderr


def test_fail_on_lets_an_attempt_with_nothing_refused_nor_unasked_exit_0(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    log = tmp_path / "audit.jsonl"
    done = governor(
        *("run", "--policy", EDIT, "--workspace", str(ws), "--log", str(log), "--json"),
        *("--fail-on", "refused,unasked", "the task", "--", sys.executable, DEMO, "--steps", "2"),
    )
    assert done.returncode == 0, done.stderr
    tally = json.loads(done.stdout)["acp"]["tally"]
    assert tally["refused"] == 0 and tally["unasked"] == 0


def test_a_paused_request_is_shown_in_words_not_as_a_python_dict(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = tmp_path / "ask.toml"
    policy.write_text('capability = "edit-workspace"\n[ask]\ntools = ["edit"]\n')
    done = governor(
        *(
            "run",
            "--policy",
            str(policy),
            "--workspace",
            str(ws),
            "--log",
            str(tmp_path / "a.jsonl"),
        ),
        *("--approvals", "pause", "the task", "--", sys.executable, DEMO),
    )
    assert done.returncode == 4, done.stderr
    pending = next(line for line in done.stdout.splitlines() if line.strip().startswith("pending"))
    assert "{" not in pending, pending
    asking = next(line for line in done.stderr.splitlines() if "asking:" in line)
    assert "{" not in asking and "permission Write hello.py" in asking, asking
    assert pending.split(None, 1)[1] == (
        f"permission Write hello.py ({ws / 'hello.py'}): waiting for a person's approval: "
        "the tool kind edit matches the ask rule"
    )


def test_a_state_folder_inside_the_workspace_is_refused_and_one_beside_it_runs(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # inside: the agent would reach every attempt's sockets and workspaces there
    monkeypatch.setenv("XDG_STATE_HOME", str(ws / "state"))
    attempts = ws / "state" / "acp-governor" / "attempts"
    done = demo(ws)
    refused(
        done, ws,
        f"the governor's folder for attempts {attempts} is inside the root {ws}, where the "
        "agent would reach every attempt's sockets and workspaces: set $XDG_STATE_HOME to a "
        "place outside every root",
    )  # fmt: skip
    monkeypatch.setenv("XDG_STATE_HOME", str(ws.parent / "state"))  # the neighbour: beside it
    assert demo(ws).returncode == 0
