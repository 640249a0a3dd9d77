"""`governor run` on a CI runner (the job summary, annotations) and `--events`,
through the real console entry point and the bundled demo agent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

GOVERNOR = Path(sys.executable).parent / "governor"
SECRET = "planted-secret-value-7f3a9c"


def run_demo(
    tmp_path: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    ws = tmp_path / f"ws-{SECRET}"  # the secret is in every path the demo touches
    ws.mkdir(exist_ok=True)
    argv = [str(GOVERNOR), "run", "--agent", "demo", "--capability", "edit-workspace",
            "--workspace", str(ws), "--log", str(tmp_path / "audit.jsonl"), *extra, "make hello"]  # fmt: skip
    environ = {**os.environ, "MY_SERVICE_TOKEN": SECRET, **(env or {})}
    return subprocess.run(argv, capture_output=True, text=True, env=environ, timeout=120)


def test_the_job_summary_has_the_tally_and_each_refusal_with_what_decided_it_and_no_secret(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    done = run_demo(tmp_path, "--annotate", env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert done.returncode == 0, done.stderr
    text = summary.read_text()
    assert text.startswith("earlier step\n")  # appended, as the runner expects
    assert "| asked | allowed | waited | refused | failed | reported | unasked |" in text
    assert "| 6 | 5 | 0 | 1 | 0 | 0 | 1 |" in text
    assert "Install .git/hooks/pre-commit" in text
    # what decided (a protected path, not the ceiling), the rule with its stars as text
    assert "| protected | protected: .git/&#42;&#42; |" in text
    assert "REFUSED by protected" in done.stderr  # the progress line says the same
    assert "NOTES.md" in text  # the change made without asking
    errors = [line for line in done.stderr.splitlines() if line.startswith("::error ")]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("::warning ")]
    assert len(errors) == 1 and "pre-commit" in errors[0]
    assert len(warnings) == 1 and "NOTES.md" in warnings[0]
    assert SECRET not in text and SECRET not in done.stderr and SECRET not in done.stdout
    end = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])
    assert f"{end['seq']} records, head <code>{end['hash']}</code>" in text
    assert f"governor audit verify --head {end['hash']} LOG" in text


def test_the_terminal_summary_names_the_head_the_log_verifies_against(tmp_path: Path) -> None:
    done = run_demo(tmp_path)
    assert done.returncode == 0, done.stderr
    log = tmp_path / "audit.jsonl"
    end = json.loads(log.read_text().splitlines()[-1])
    assert f"head  {end['hash']} ({end['seq']} records)" in done.stdout
    verified = subprocess.run(
        [str(GOVERNOR), "audit", "verify", str(log), "--head", end["hash"]],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert verified.returncode == 0 and "intact, anchored" in verified.stdout, verified.stdout


def test_without_the_variable_or_the_flag_nothing_is_written(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    done = subprocess.run(
        [
            str(GOVERNOR),
            "run",
            "--agent",
            "demo",
            "--workspace",
            str(tmp_path),
            "--log",
            str(tmp_path.parent / f"{tmp_path.name}.jsonl"),
            "make hello",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "::error" not in done.stderr and "::warning" not in done.stderr


def test_events_on_stdout_are_every_decision_of_the_log_in_order(tmp_path: Path) -> None:
    done = run_demo(tmp_path, "--events", "-")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]  # nothing else on stdout
    assert [e["n"] for e in events] == list(range(1, len(events) + 1))
    assert {e["v"] for e in events} == {1}
    attempt = events[0]["attempt"]
    assert events[0]["type"] == "attempt" and {e["attempt"] for e in events} == {attempt}
    assert events[-1]["type"] == "outcome" and events[-1]["outcome"]["status"] == "completed"
    logged = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    last = events[-1]["outcome"]
    assert (last["log_head"], last["log_records"]) == (logged[-1]["hash"], logged[-1]["seq"])
    decisions = [r for r in logged if r["kind"] in ("permission", "read", "write", "terminal", "network")]
    seen = [e for e in events if e["type"] == "decision"]
    assert [(e["seq"], e["kind"], e["verdict"], e["by"]) for e in seen] == [
        (r["seq"], r["kind"], r["verdict"], r["by"]) for r in decisions
    ]
    assert any(e["type"] == "message" for e in events) and any(e["type"] == "plan" for e in events)
    assert SECRET not in done.stdout


def test_every_event_carries_a_time_and_a_decisions_is_its_records(tmp_path: Path) -> None:
    events_file = tmp_path / "events.jsonl"
    started = time.time()
    done = run_demo(tmp_path, "--events", str(events_file), "--json")
    ended = time.time()
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    times = [e["time"] for e in events]
    assert all(type(t) is float and started <= t <= ended for t in times)
    assert times == sorted(times)  # in the order they happened
    logged = {r["seq"]: r for r in map(json.loads, (tmp_path / "audit.jsonl").read_text().splitlines())}
    decided = [e for e in events if e["type"] == "decision"]
    assert decided and all(e["time"] == logged[e["seq"]]["time"] for e in decided)
    # --json and --events together: stdout holds the outcome, the events file the same one
    outcome = json.loads(done.stdout)
    assert events[-1]["outcome"]["exit_code"] == outcome["exit_code"] == 0


def test_the_outcome_carries_its_exit_code_workspace_and_changed_files(tmp_path: Path) -> None:
    done = run_demo(tmp_path, "--json", "--fail-on", "refused")
    outcome = json.loads(done.stdout)
    assert done.returncode == outcome["exit_code"] == 6  # the demo's git hook was refused
    assert outcome["status"] == "completed" and list(outcome)[:2] == ["status", "exit_code"]
    ws = tmp_path / f"ws-{SECRET}"
    masked = str(ws.resolve()).replace(SECRET, "[secret]")  # a secret in the path stays out
    assert outcome["workspace"] == masked
    assert sorted(outcome["files_changed"]) == [f"{masked}/NOTES.md", f"{masked}/hello.py"]
    assert SECRET not in done.stdout


def test_an_attempt_that_changed_nothing_lists_no_changed_files_rather_than_none(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    demo = Path(__file__).resolve().parents[2] / "governor" / "agents" / "demo.py"
    argv = [str(GOVERNOR), "run", "--capability", "read-only", "--workspace", str(ws),
            "--log", str(tmp_path / "audit.jsonl"), "--json", "look around",
            "--", sys.executable, str(demo), "--steps", "0"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    outcome = json.loads(done.stdout)
    assert (done.returncode, outcome["exit_code"]) == (0, 0), done.stderr
    assert outcome["files_changed"] == [] and outcome["workspace"] == str(ws.resolve())
