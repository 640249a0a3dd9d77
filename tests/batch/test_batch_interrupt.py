"""Ctrl-C and crashes during a local batch, then a rerun with the same --out:
every job ends exactly once, and nothing half-written is taken for finished."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from conftest import GOVERNOR, demo_job, outcome_lines, slow_demo

from governor.audit.verify import read_lines, verify

JobsFile = Callable[[Iterable[dict[str, Any]]], Path]


def _jobs(repo: Path) -> list[dict[str, Any]]:
    quick = [demo_job(f"quick-{n}", repo) for n in range(2)]
    slow = [{**demo_job(f"slow-{n}", repo), "agent": None, "argv": slow_demo(2)} for n in range(4)]
    return quick + [{k: v for k, v in j.items() if v is not None} for j in slow]


def _start(jobs: Path, out: Path, scratch: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(GOVERNOR), "batch", str(jobs), "--out", str(out), "--jobs", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(scratch)},
    )


def _when_finished(out: Path, count: int, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        path = out / "outcomes.jsonl"
        if path.exists() and path.read_text().count("\n") >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{count} job(s) did not finish: {process.poll()}")


def _each_once_and_verified(out: Path, ids: list[str]) -> None:
    lines = outcome_lines(out)
    assert sorted(line["job"] for line in lines) == sorted(ids)  # each exactly once
    for line in lines:
        assert line["status"] == "completed", line
        assert verify(read_lines(out / line["job"] / "audit.jsonl")).problem is None
        assert "+++ b/hello.py" in (out / line["job"] / "changes.patch").read_text()


def test_ctrl_c_ends_the_running_jobs_unrecorded_and_a_rerun_finishes_each_once(
    tmp_path: Path, repo: Path, jobs_file: JobsFile
) -> None:
    jobs = _jobs(repo)
    path = jobs_file(jobs)
    out, scratch = tmp_path / "out", tmp_path / "scratch"
    scratch.mkdir()
    batch = _start(path, out, scratch)
    _when_finished(out, 2, batch)
    time.sleep(0.5)  # two slow jobs are running now
    batch.send_signal(signal.SIGINT)
    _, stderr = batch.communicate(timeout=120)
    assert batch.returncode == 1, stderr
    assert "SIGINT: stopping" in stderr and "interrupted, runs again on a rerun" in stderr
    assert "run the same command again to resume" in stderr
    finished = [line["job"] for line in outcome_lines(out)]
    assert len(finished) < len(jobs) and len(set(finished)) == len(finished)
    assert list(scratch.iterdir()) == []  # the interrupted workspaces were removed

    rerun = _start(path, out, scratch)
    _stdout, stderr = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, stderr
    assert f"{len(finished)} finished by an earlier run, skipped" in stderr
    _each_once_and_verified(out, [j["id"] for j in jobs])


def test_after_a_crash_a_cut_line_and_files_without_a_line_are_run_again(
    tmp_path: Path, repo: Path, jobs_file: JobsFile
) -> None:
    jobs = _jobs(repo)
    path = jobs_file(jobs)
    out, scratch = tmp_path / "out", tmp_path / "scratch"
    scratch.mkdir()
    batch = _start(path, out, scratch)
    _when_finished(out, 2, batch)
    batch.kill()  # SIGKILL: no cleanup at all
    batch.communicate(timeout=60)
    finished = [line["job"] for line in outcome_lines(out)]
    # what a crash at the worst instants leaves: a job's files renamed into place
    # before its line, and a line cut half-way
    (out / "slow-3").mkdir(exist_ok=True)
    (out / "slow-3" / "audit.jsonl").write_text("")
    (out / "slow-3" / "changes.patch").write_text("")
    with (out / "outcomes.jsonl").open("a") as f:
        f.write('{"job": "slow-2", "status": "compl')
    rerun = _start(path, out, scratch)
    _, stderr = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, stderr
    assert f"{len(finished)} finished by an earlier run, skipped" in stderr
    _each_once_and_verified(out, [j["id"] for j in jobs])
