"""`governor run` through a real subprocess: every exit code, every before-start error.

Exit codes: 0 completed, 1 failed or incomplete, 2 refused before start, 3 blocked,
4 needs approval. A before-start error is one clear line on stderr, no traceback,
and nothing runs (no audit log is written).
"""

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


def governor(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GOVERNOR, *args],
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    return w


def run_demo(
    ws: Path,
    *extra: str,
    agent_args: tuple[str, ...] = (),
    prompt: tuple[str, ...] = ("the task",),
    json_output: bool = True,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`governor run` on the demo agent (as an argv after --) at edit-workspace."""
    log = str(ws.parent / "audit.jsonl")
    return governor(
        "run",
        "--policy",
        EDIT,
        "--workspace",
        str(ws),
        "--log",
        log,
        *(("--json",) if json_output else ()),
        *extra,
        *prompt,
        "--",
        sys.executable,
        DEMO,
        *agent_args,
        stdin=stdin,
    )


def test_completed_exits_0_and_prints_only_the_outcome_json(ws: Path) -> None:
    done = run_demo(ws)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"


def test_failed_exits_1(ws: Path) -> None:
    done = governor(
        "run",
        "--workspace",
        str(ws),
        "--log",
        str(ws.parent / "a.jsonl"),
        "--json",
        "x",
        "--",
        sys.executable,
        "-c",
        "import sys; sys.exit(7)",
    )
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["status"] == "failed"


def test_blocked_exits_3(ws: Path) -> None:
    done = run_demo(ws, agent_args=("--steps", "0", "--final", "BLOCKED: no spec"))
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["reason"] == "no spec"


def test_needs_approval_exits_4(ws: Path) -> None:
    done = run_demo(ws, "--approvals", "pause", "--capability", "read-only")
    outcome = json.loads(done.stdout)
    assert outcome["status"] in ("needs_approval", "completed")
    policy = ws.parent / "ask.toml"
    policy.write_text('capability = "edit-workspace"\n[ask]\ntools = ["edit"]\n')
    done = governor(
        "run",
        "--policy",
        str(policy),
        "--workspace",
        str(ws),
        "--log",
        str(ws.parent / "b.jsonl"),
        "--approvals",
        "pause",
        "--json",
        "t",
        "--",
        sys.executable,
        DEMO,
    )
    assert done.returncode == 4, done.stderr
    assert json.loads(done.stdout)["status"] == "needs_approval"


def refused(done: subprocess.CompletedProcess[str], *phrases: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    for phrase in phrases:
        assert phrase in done.stderr


def test_a_request_over_the_ceiling_lists_every_violation_and_nothing_runs(ws: Path) -> None:
    ceiling = ws.parent / "ceiling.toml"
    ceiling.write_text('max_capability = "read-only"\nallowed_agents = ["codex"]\n')
    done = governor(
        "run",
        "--agent",
        "demo",
        "--policy",
        EDIT,
        "--ceiling",
        str(ceiling),
        "--workspace",
        str(ws),
        "--log",
        str(ws.parent / "c.jsonl"),
        "--agent-arg=--token=sk-live-0123456789abcdef",
        "t",
    )
    refused(
        done,
        "agent demo is not permitted",
        "exceeds the permitted maximum read-only",
        "1 requested",
    )
    assert "sk-live" not in done.stderr
    assert not (ws.parent / "c.jsonl").exists()
    assert not (ws / "hello.py").exists()


def test_unset_declared_variables_are_all_reported(ws: Path) -> None:
    done = governor(
        "run",
        "--agent",
        "demo",
        "--workspace",
        str(ws),
        "--env",
        "GOVT_ONE",
        "--env",
        "GOVT_TWO",
        "t",
        env={"GOVT_TWO": ""},
    )
    refused(done, "unset or empty: GOVT_ONE, GOVT_TWO")


def test_a_missing_workspace_is_one_clear_line(tmp_path: Path) -> None:
    refused(
        governor("run", "--agent", "demo", "--workspace", str(tmp_path / "nope"), "t"),
        "the workspace does not exist",
    )


def test_an_agent_not_installed_names_the_install_and_login_commands(ws: Path) -> None:
    done = governor(
        "run", "--agent", "goose", "--workspace", str(ws), "t", env={"PATH": "/nonexistent"}
    )
    refused(done, "goose is not installed", "then sign in: goose configure")


def test_an_unknown_preset_names_the_known_ones(ws: Path) -> None:
    refused(governor("run", "--agent", "gpt", "--workspace", str(ws), "t"), "gpt", "claude")


def test_a_bwrap_that_cannot_work_refuses_the_run_never_runs_it_bare(ws: Path) -> None:
    done = governor(
        "run",
        "--agent",
        "demo",
        "--policy",
        EDIT,
        "--workspace",
        str(ws),
        "--log",
        str(ws.parent / "d.jsonl"),
        "t",
        env={"ACP_GOVERNOR_BWRAP": "/nonexistent/bwrap"},
    )
    refused(done, "sandbox cannot work here")
    assert not (ws / "hello.py").exists()


def test_a_bad_policy_file_names_the_file_and_the_key(ws: Path) -> None:
    policy = ws.parent / "p.toml"
    policy.write_text('capabilty = "read-only"\n')
    refused(
        governor("run", "--agent", "demo", "--policy", str(policy), "--workspace", str(ws), "t"),
        "capabilty",
        "did you mean `capability`",
    )


def test_no_agent_or_both_agents_is_a_usage_error(ws: Path) -> None:
    none = governor("run", "--workspace", str(ws), "t")
    refused(none, "say which agent: no agent was given")
    assert "not both" not in none.stderr  # nothing was given twice
    both = governor("run", "--agent", "demo", "--workspace", str(ws), "t", "--", "x")
    refused(both, "both a preset and a command were given", "not both")


def test_the_prompt_may_come_from_stdin_or_a_file(ws: Path) -> None:
    done = run_demo(ws, prompt=("-",), stdin="from stdin")
    assert done.returncode == 0, done.stderr
    prompt = ws.parent / "prompt.md"
    prompt.write_text("from a file")
    done = run_demo(ws, prompt=("--prompt-file", str(prompt)))
    assert done.returncode == 0, done.stderr
    refused(
        governor(
            "run", "--agent", "demo", "--workspace", str(ws), "--prompt-file", str(ws / "none.md")
        ),
        "cannot read the prompt",
    )


def test_without_a_terminal_there_is_no_animation_and_logs_are_json_lines(ws: Path) -> None:
    done = run_demo(ws, json_output=False)
    assert done.returncode == 0
    assert "\r" not in done.stdout + done.stderr and "\x1b[" not in done.stdout + done.stderr
    assert "status  completed" in done.stdout
    for line in done.stderr.splitlines():
        if line.startswith("{"):
            json.loads(line)


def test_version_and_completion() -> None:
    assert governor("--version").stdout.startswith("acp-governor ")
    script = governor("completion", "bash").stdout
    assert "complete -o filenames -F _governor governor" in script and "--approvals" in script
