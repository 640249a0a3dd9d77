"""`governor batch` on the local pool, for real: the demo agent, real git, real sandboxes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from conftest import (
    GOVERNOR,
    HELLO,
    check_twenty,
    demo_job,
    git,
    outcome_lines,
    quitting_job,
    twenty,
)

from governor.batch import Job, run_batch

JobsFile = Callable[[Iterable[dict[str, Any]]], Path]


def test_twenty_demo_jobs_give_nineteen_completed_outcomes_with_patches_and_verified_logs(
    tmp_path: Path, repo: Path, jobs_file: JobsFile
) -> None:
    jobs = jobs_file(twenty(repo))
    out = tmp_path / "out"
    done = subprocess.run(
        [str(GOVERNOR), "batch", str(jobs), "--out", str(out), "--jobs", "4"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stderr  # one job did not complete
    check_twenty(out)
    # plain progress lines (stderr is not a terminal), then the summary table
    assert "20 job(s) to run" in done.stderr
    assert "quits: failed" in done.stderr and "job-03: completed" in done.stderr
    assert "20 job(s): 19 completed, 1 failed" in done.stdout
    assert done.stdout.splitlines()[0].split()[:3] == ["JOB", "STATUS", "AGENT"]
    # nothing of the workspaces is left inside the output
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [".lock", "outcomes.jsonl", *(line["job"] for line in outcome_lines(out))]
    )


def test_governor_audit_over_a_batch_output_shows_each_job_and_the_total_tally(
    tmp_path: Path, repo: Path
) -> None:
    out = tmp_path / "out"
    result = run_batch(
        [demo_job("one", repo), demo_job("two", repo), quitting_job("quits", repo)],
        out,
        parallel=2,
    )
    assert result.exit_code == 1
    table = subprocess.run(
        [str(GOVERNOR), "audit", str(out)], capture_output=True, text=True, timeout=60
    )
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line.split() for line in table.stdout.splitlines()[1:4]}
    assert rows["one"][1:3] == ["completed", "demo"] and rows["quits"][1] == "failed"
    assert (
        "3 job(s): 2 completed, 1 failed; 12 asked, 10 allowed, 0 waited, 2 refused" in table.stdout
    )
    assert "warning" not in table.stderr  # outcomes.jsonl is not read as a log
    verified = subprocess.run(
        [str(GOVERNOR), "audit", "verify", str(out)], capture_output=True, text=True, timeout=60
    )
    assert verified.returncode == 0 and verified.stdout.count(": intact") == 3, verified.stdout
    as_json = json.loads(
        subprocess.run(
            [str(GOVERNOR), "audit", "--json", str(out)], capture_output=True, text=True, timeout=60
        ).stdout
    )
    assert {r["job"]: r["files_changed"] for r in as_json["jobs"]} == {"one": 2, "two": 2, "quits": 0}
    assert as_json["status"] == "ok"  # every log read verifies


def test_governor_batch_json_is_one_document_with_the_batchs_status_first(
    tmp_path: Path, repo: Path, jobs_file: JobsFile
) -> None:
    jobs = jobs_file([demo_job("one", repo), quitting_job("quits", repo)])
    done = subprocess.run(
        [str(GOVERNOR), "batch", str(jobs), "--out", str(tmp_path / "out"), "--json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # one job did not complete
    doc = json.loads(done.stdout)
    assert next(iter(doc)) == "status" and (doc["status"], doc["exit_code"]) == ("failed", 1), doc
    assert {j["job"]: j["status"] for j in doc["jobs"]} == {"one": "completed", "quits": "failed"}


def test_a_job_runs_at_its_ref_and_its_patch_applies_to_a_clone_at_that_ref(
    tmp_path: Path, repo: Path
) -> None:
    out = tmp_path / "out"
    job = Job(
        id="at-first",
        prompt="Write a hello program",
        agent="demo",
        repo=str(repo),
        ref="first",
        capability="edit-workspace",
        timeout=120,
    )
    result = run_batch([job], out, parallel=1)
    assert result.exit_code == 0, result.results[0].reason
    (done,) = result.results
    assert done.line["commit"] == git(repo, "rev-parse", "first").strip()
    check = tmp_path / "check"
    git(tmp_path, "clone", "-q", str(repo), str(check))
    git(check, "checkout", "-q", "first")
    git(check, "apply", "--index", str(done.changes))
    assert (check / "hello.py").read_text() == HELLO + "\n"
    assert not (check / "src.txt").exists()  # the second commit is not in the workspace


def test_a_rerun_skips_the_finished_jobs_and_runs_only_the_others(
    tmp_path: Path, repo: Path
) -> None:
    out = tmp_path / "out"
    first = run_batch([demo_job("a", repo)], out, parallel=1)
    assert first.exit_code == 0
    events: list[str] = []
    second = run_batch(
        [demo_job("a", repo), demo_job("b", repo)],
        out,
        parallel=1,
        on_progress=lambda e: events.append(f"{e.kind}:{e.job}"),
    )
    assert second.exit_code == 0
    assert "skipped:a" in events and "started:b" in events and "started:a" not in events
    assert [r.earlier for r in second.results] == [True, False]
    assert [line["job"] for line in outcome_lines(out)] == ["a", "b"]


def test_a_repository_that_cannot_be_cloned_ends_its_job_failed_naming_the_step(
    tmp_path: Path, repo: Path
) -> None:
    out = tmp_path / "out"
    result = run_batch(
        [{**demo_job("gone", repo), "repo": "file:///nonexistent/repo.git"}], out, parallel=1
    )
    (done,) = result.results
    assert done.status == "failed" and done.reason is not None
    assert done.reason.startswith("could not clone file:///nonexistent/repo.git")
    (line,) = outcome_lines(out)
    assert (line["status"], line["exit_code"]) == ("failed", 1)
    assert (out / "gone" / "changes.patch").read_bytes() == b""


def test_the_batch_example_grades_every_patch_and_a_rerun_skips_the_finished_jobs(
    tmp_path: Path,
) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "batch.py"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "s")}
    argv = [sys.executable, str(example), "--out", str(tmp_path / "out")]
    first = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "3/3 passed" in first.stdout and "graded PASS: hello from the demo agent" in first.stdout
    again = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("(finished by an earlier run)") == 3
