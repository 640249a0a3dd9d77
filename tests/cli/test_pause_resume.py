"""A paused attempt goes on (issue 38), through the real `governor` console script:
`run --approvals pause` keeps its state and prints the commands, `approve` writes
a person's decision into the attempt's own chain, `resume` continues the attempt
(the demo agent, which can neither resume nor load a session: afresh, said so).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

GOVERNOR = str(Path(sys.executable).parent / "governor")
DEMO = str(Path(__file__).resolve().parents[2] / "governor" / "agents" / "demo.py")
ASK_EDITS = 'capability = "edit-workspace"\n[ask]\ntools = ["edit"]\n'


@pytest.fixture
def job(tmp_path: Path) -> dict[str, Path]:
    """A workspace, a policy that asks before every edit, a log, and a state folder
    of this test's own."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ask.toml").write_text(ASK_EDITS)
    return {
        "ws": tmp_path / "ws",
        "policy": tmp_path / "ask.toml",
        "log": tmp_path / "audit.jsonl",
        "state": tmp_path / "state",
    }


def governor(job: dict[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(job["state"])}
    return subprocess.run(
        [GOVERNOR, *args], capture_output=True, text=True, timeout=120, env=env
    )


def paused(job: dict[str, Path], *extra: str) -> subprocess.CompletedProcess[str]:
    done = governor(
        job, "run", "--policy", str(job["policy"]), "--workspace", str(job["ws"]),
        "--log", str(job["log"]), "--approvals", "pause", *extra, "write hello.py",
        "--", sys.executable, DEMO,
    )  # fmt: skip
    assert done.returncode == 4, (done.stdout, done.stderr)
    return done


def records(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def verified(job: dict[str, Path]) -> None:
    done = governor(job, "audit", "verify", str(job["log"]))
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "intact" in done.stdout


def test_a_pause_keeps_the_job_session_and_request_hidden_and_prints_the_commands(
    job: dict[str, Path],
) -> None:
    done = paused(job)
    log = str(job["log"])
    (state_file,) = (job["state"] / "acp-governor" / "paused").glob("*.json")
    attempt = state_file.stem  # the commands name the attempt: a log may hold several
    assert f"governor approve {log} --attempt {attempt} --request 1" in done.stdout
    assert f"governor resume {log} --attempt {attempt}" in done.stdout
    assert stat.S_IMODE(state_file.stat().st_mode) == 0o600
    # beside it, the attempt's start, which every part is judged against: the same mode
    assert stat.S_IMODE(state_file.with_suffix(".baseline").stat().st_mode) == 0o600
    assert stat.S_IMODE(state_file.parent.stat().st_mode) == 0o700
    state = json.loads(state_file.read_text())
    attempt = records(job["log"])[0]["attempt"]
    assert state_file.name == f"{attempt}.json"
    assert state["job"]["policy"] == str(job["policy"])
    assert state["job"]["workspace"] == str(job["ws"])
    assert state["job"]["argv"] == [sys.executable, DEMO]
    assert state["session"] == {"id": "demo-session-1", "load": False, "resume": False}
    assert state["pending"]["kind"] == "permission"
    assert state["pending"]["request"] == 1
    assert state["pending"]["shown"] == "Write hello.py"
    last = records(job["log"])[-1]
    assert (state["head"], state["records"]) == (last["hash"], last["seq"])
    assert state["log"] == log


def test_approved_and_resumed_afresh_the_write_lands_under_one_attempt_id_and_the_log_verifies(
    job: dict[str, Path],
) -> None:
    paused(job)
    assert not (job["ws"] / "hello.py").exists()
    done = governor(job, "approve", str(job["log"]), "--request", "1")
    assert done.returncode == 0, done.stderr
    approval = records(job["log"])[-1]
    assert approval["kind"] == "approval"
    assert approval["answer"] == "once" and approval["request"] == 1
    assert approval["by"] == "person" and approval["uid"] == os.getuid()
    done = governor(job, "resume", str(job["log"]), "--json")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "completed"
    assert (job["ws"] / "hello.py").exists()
    assert any("started afresh" in n for n in outcome["acp"]["notices"])
    written = records(job["log"])
    assert {r["attempt"] for r in written} == {outcome["run_id"]}
    assert [r["kind"] for r in written].count("attempt-start") == 1
    assert [r["kind"] for r in written].count("attempt-resume") == 1
    allowed = [
        r for r in written
        if r["kind"] == "permission" and r.get("by") == "person" and r.get("verdict") == "allow"
    ]  # fmt: skip
    assert len(allowed) == 1
    assert outcome["log_records"] == written[-1]["seq"] == len(written)
    verified(job)
    story = governor(job, "audit", "--attempt", outcome["run_id"], str(job["log"]))
    assert f"approval of request 1 (Write hello.py): once by {approval['user']}" in story.stdout
    assert "resumed (part 2, after the approval #" in story.stdout
    replay = governor(job, "audit", "replay", str(job["log"]), "--policy", str(job["policy"]))
    assert replay.returncode == 0 and "record is missing" not in replay.stdout, replay.stdout
    again = governor(job, "resume", str(job["log"]))
    assert again.returncode == 2 and "no paused state" in again.stderr


def test_denied_and_resumed_the_write_never_lands_and_the_refusal_is_the_persons(
    job: dict[str, Path],
) -> None:
    paused(job)
    done = governor(job, "approve", str(job["log"]), "--deny")
    assert done.returncode == 0, done.stderr
    done = governor(job, "resume", str(job["log"]), "--json")
    assert done.returncode == 0, done.stderr
    assert not (job["ws"] / "hello.py").exists()
    refused = [
        r for r in records(job["log"])
        if r["kind"] == "permission" and r.get("by") == "person" and r.get("verdict") == "deny"
    ]  # fmt: skip
    assert len(refused) == 1
    verified(job)


def test_a_decision_is_written_once_and_only_for_the_waiting_request(
    job: dict[str, Path],
) -> None:
    paused(job)
    early = governor(job, "resume", str(job["log"]))
    assert early.returncode == 2 and "governor approve" in early.stderr
    wrong = governor(job, "approve", str(job["log"]), "--request", "2")
    assert wrong.returncode == 2 and "request 1 is" in wrong.stderr
    assert governor(job, "approve", str(job["log"])).returncode == 0
    twice = governor(job, "approve", str(job["log"]), "--deny")
    assert twice.returncode == 2 and "decided already" in twice.stderr
    assert [r["kind"] for r in records(job["log"])].count("approval") == 1
    verified(job)


def test_an_approval_never_widens_the_job_what_the_protection_refuses_stays_refused(
    job: dict[str, Path],
) -> None:
    """Approved for the rest of the attempt, the edit the person saw is allowed;
    an edit of a protected file, which the same [ask] rule would have asked,
    is refused by the protection, never handed to the approval."""
    paused(job)
    assert governor(job, "approve", str(job["log"]), "--always").returncode == 0
    done = governor(job, "resume", str(job["log"]), "--json")
    assert done.returncode == 0, done.stderr
    assert (job["ws"] / "hello.py").exists()
    hook = [
        r for r in records(job["log"])
        if r["kind"] == "permission" and "pre-commit" in json.dumps(r.get("subject"))
    ]  # fmt: skip
    assert hook and all(r["verdict"] == "deny" and r["by"] != "person" for r in hook)
    assert not (job["ws"] / ".git" / "hooks" / "pre-commit").exists()


def test_a_ceiling_tightened_since_the_pause_refuses_the_resume_and_nothing_runs(
    job: dict[str, Path], tmp_path: Path
) -> None:
    ceiling = tmp_path / "ceiling.toml"
    ceiling.write_text('allowed_agents = ["acp"]\n')
    paused(job, "--ceiling", str(ceiling))
    assert governor(job, "approve", str(job["log"]), "--always").returncode == 0
    ceiling.write_text('allowed_agents = ["acp"]\nprotected = ["hello.py"]\n')
    before = job["log"].read_bytes()
    done = governor(job, "resume", str(job["log"]))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "ceiling" in done.stderr and "never changes the job" in done.stderr
    assert not (job["ws"] / "hello.py").exists()
    assert job["log"].read_bytes() == before


@pytest.mark.parametrize(("limit", "status"), [(4, "failed"), (5, "completed")])
def test_the_limits_span_both_parts_and_a_call_made_again_is_counted_once(
    job: dict[str, Path], limit: int, status: str
) -> None:
    """The demo makes 2 tool calls before it pauses (the second, the one paused
    on) and starts afresh in its second part, making its 5 under the same ids:
    5 calls in all, each counted once over both parts (the paused one by the
    part that decides it), so a limit of 5 lets it finish and 4 stops it."""
    job["policy"].write_text(ASK_EDITS + f"[limits]\ntool_calls = {limit}\n")
    paused(job)
    assert governor(job, "approve", str(job["log"])).returncode == 0
    done = governor(job, "resume", str(job["log"]), "--json")
    outcome = json.loads(done.stdout)
    assert outcome["status"] == status, outcome
    if status == "failed":
        assert f"tool_calls limit {limit}" in outcome["reason"]
    else:
        assert outcome["usage"]["tool_calls"] == 5, outcome["usage"]
    verified(job)


def test_no_sandbox_sees_a_paused_attempts_state(job: dict[str, Path], tmp_path: Path) -> None:
    """A later attempt's program looks for the paused state where it lies on the
    host: its folder is not there (hidden with the state folder); the same
    listing of its own workspace works."""
    paused(job)
    (state_file,) = (job["state"] / "acp-governor" / "paused").glob("*.json")
    other = tmp_path / "other"
    other.mkdir()
    look = (
        f"ls -a {state_file.parent} > seen.txt 2>&1; cat {state_file} >> seen.txt 2>&1; "
        "ls -a . >> seen.txt"
    )
    done = governor(
        job, "run", "--kind", "command", "--policy", "edit-workspace", "--workspace", str(other),
        "--log", str(tmp_path / "other.jsonl"), "-q", "look", "--", "sh", "-c", look,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout, done.stderr)
    seen = (other / "seen.txt").read_text()
    assert f"cannot access '{state_file.parent}': No such file or directory" in seen, seen
    assert f"{state_file}: No such file or directory" in seen and '"pending"' not in seen, seen
    assert "seen.txt" in seen  # the allowed neighbour: its own workspace is listed


LOADING = str(Path(__file__).resolve().parent / "loading_agent.py")


def test_an_agent_that_loads_its_session_goes_on_in_it_and_its_replayed_history_is_not_counted_again(
    job: dict[str, Path],
) -> None:
    """`loading_agent.py` advertises loadSession only: the second part loads its
    session (session/load), whose replay reports the first part's write as a
    completed tool call; folded, it would be a second tool call and a change
    made without asking."""
    run = (
        "run", "--policy", str(job["policy"]), "--workspace", str(job["ws"]), "--log",
        str(job["log"]), "--approvals", "pause", "-q", "write x.txt", "--", sys.executable, LOADING,
    )  # fmt: skip
    assert governor(job, *run).returncode == 4
    assert governor(job, "approve", str(job["log"])).returncode == 0
    done = governor(job, "resume", str(job["log"]), "--json")
    assert done.returncode == 0, (done.stdout, done.stderr)
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "completed", outcome["reason"]
    assert any("session loaded (session/load)" in n for n in outcome["acp"]["notices"])
    assert (job["ws"] / "x.txt").read_text() == "loaded\n"
    # one call: asked, paused on, asked again and carried out (counted by the part that decided it)
    assert outcome["usage"]["tool_calls"] == 1, outcome["usage"]
    assert outcome["acp"]["tally"]["unasked"] == 0
    assert not [r for r in records(job["log"]) if r["kind"] == "unasked"]
    verified(job)


def test_a_paused_attempt_is_decided_and_resumed_by_one_command_at_a_time(
    job: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While one command holds the attempt (a lock beside its state), another
    `approve` or `resume` of it is refused, naming why; after, they go on: two
    decisions, or two parts, never go into one chain at once."""
    from governor.attempt.paused import exclusive

    paused(job)
    attempt = records(job["log"])[0]["attempt"]
    monkeypatch.setenv("XDG_STATE_HOME", str(job["state"]))
    with exclusive(str(attempt)):
        refused = governor(job, "approve", str(job["log"]))
        assert refused.returncode == 2 and "another command" in refused.stderr, refused.stderr
    assert governor(job, "approve", str(job["log"])).returncode == 0
    with exclusive(str(attempt)):
        refused = governor(job, "resume", str(job["log"]))
        assert refused.returncode == 2 and "another command" in refused.stderr, refused.stderr
    assert [r["kind"] for r in records(job["log"])].count("approval") == 1
    resumed = governor(job, "resume", str(job["log"]), "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert (job["ws"] / "hello.py").exists()
