"""Shared by the batch tests: a real git repository and jobs files of demo jobs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "governor" / "agents" / "demo.py"
GOVERNOR = Path(sys.executable).parent / "governor"
HELLO = 'print("hello from the demo agent")'


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with two commits (``first`` is tagged)."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("# a project\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "first")
    git(path, "tag", "first")
    (path / "src.txt").write_text("second\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "second")
    return path


def slow_demo(seconds: float) -> list[str]:
    """The demo agent, started ``seconds`` late (a job that is still running when
    the test interrupts or kills something)."""
    # The script's path is an argument of its own, not only inside the code: the
    # agent sandbox keeps the absolute paths of an agent's argv visible, and a
    # checkout under /tmp (a CI clone) is otherwise hidden by the private /tmp.
    code = (
        f"import runpy, sys, time; time.sleep({seconds}); sys.argv = sys.argv[1:]; "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    return [sys.executable, "-c", code, str(DEMO)]


def demo_job(job_id: str, repo: Path, **kw: Any) -> dict[str, Any]:
    """A job line for the demo agent at edit-workspace."""
    return {
        "id": job_id,
        "prompt": "Write a hello program and run it",
        "agent": "demo",
        "repo": str(repo),
        "capability": "edit-workspace",
        "timeout": 120,
        **kw,
    }


def quitting_job(job_id: str, repo: Path) -> dict[str, Any]:
    """A job whose agent exits at once (before it answers ``initialize``)."""
    return {"id": job_id, "prompt": "anything", "argv": ["/bin/true"], "repo": str(repo)}


@pytest.fixture
def jobs_file(tmp_path: Path) -> Callable[[Iterable[dict[str, Any]]], Path]:
    def write(jobs: Iterable[dict[str, Any]]) -> Path:
        path = tmp_path / "jobs.jsonl"
        path.write_text("".join(json.dumps(j) + "\n" for j in jobs))
        return path

    return write


def twenty(repo: Path) -> list[dict[str, Any]]:
    """19 demo jobs and one whose agent exits at once."""
    jobs = [demo_job(f"job-{n:02d}", repo) for n in range(19)]
    jobs.insert(7, quitting_job("quits", repo))
    return jobs


TWENTY_IDS = sorted([f"job-{n:02d}" for n in range(19)] + ["quits"])


def outcome_lines(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "outcomes.jsonl").read_text().splitlines()]


def check_twenty(out: Path) -> None:
    """What the 20-job batch must give: 19 completed outcomes, each patch holding
    the demo's file, each log verifying; the quitting job failed."""
    from governor.audit.verify import read_lines, verify

    lines = outcome_lines(out)
    assert sorted(line["job"] for line in lines) == TWENTY_IDS
    by_job = {line["job"]: line for line in lines}
    assert by_job["quits"]["status"] == "failed", by_job["quits"]
    # each line carries the code `governor run` would exit with for its job
    assert {line["job"]: line["exit_code"] for line in lines} == {
        job: 1 if job == "quits" else 0 for job in TWENTY_IDS
    }
    completed = [line for line in lines if line["status"] == "completed"]
    assert len(completed) == 19, [(x["job"], x["status"], x.get("reason")) for x in lines]
    for line in lines:
        folder = out / line["job"]
        assert line["log"] == str(folder / "audit.jsonl")
        check = verify(read_lines(folder / "audit.jsonl"))
        assert check.problem is None and check.unfinished == () and check.attempts == 1
        patch = (folder / "changes.patch").read_text()
        if line["status"] == "completed":
            assert "+++ b/hello.py" in patch and f"+{HELLO}" in patch
            assert "+++ b/NOTES.md" in patch  # the change it made without asking, too
            assert ".claude" not in patch  # no placeholder of the sandbox
        else:
            assert patch == ""
