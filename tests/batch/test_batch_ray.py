"""`governor batch --ray` on a real local Ray cluster started here (and stopped:
only its own processes, never `ray stop`, which is machine-wide)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import GOVERNOR, check_twenty, demo_job, outcome_lines, slow_demo, twenty
from ray_cluster import LocalRay

if os.environ.get("CI"):
    import ray  # noqa: F401  (CI installs the extra: a missing Ray fails here, never skips)
else:
    pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.slow]

JobsFile = Callable[[Iterable[dict[str, Any]]], Path]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRay]:
    with LocalRay(num_cpus=2) as c:
        yield c


def _batch(jobs: Path, out: Path, address: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(GOVERNOR), "batch", str(jobs), "--out", str(out), "--ray", address, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_twenty_demo_jobs_on_ray_give_nineteen_completed_outcomes(
    tmp_path: Path, repo: Path, jobs_file: JobsFile, cluster: LocalRay
) -> None:
    out = tmp_path / "out"
    batch = _batch(jobs_file(twenty(repo)), out, cluster.address)
    stdout, stderr = batch.communicate(timeout=600)
    assert batch.returncode == 1, stderr
    check_twenty(out)
    assert "sandbox ok" in stderr  # the node's check, once
    assert "20 job(s): 19 completed, 1 failed" in stdout
    pids = {line["pid"] for line in outcome_lines(out)}
    assert os.getpid() not in pids and batch.pid not in pids  # they ran on Ray's workers


def test_a_killed_worker_s_job_is_retried_and_completes(
    tmp_path: Path, repo: Path, jobs_file: JobsFile, cluster: LocalRay
) -> None:
    slow = {**demo_job("slow", repo), "argv": slow_demo(4)}
    del slow["agent"]
    out = tmp_path / "out"
    batch = _batch(jobs_file([slow, demo_job("quick", repo)]), out, cluster.address)
    deadline = time.monotonic() + 120
    worker = None
    while worker is None and time.monotonic() < deadline and batch.poll() is None:
        worker = cluster.worker_running("governor-batch:slow")
        time.sleep(0.1)
    assert worker is not None, "the slow job's worker was never seen running"
    time.sleep(1.0)  # its attempt is under way: the agent is sleeping
    os.kill(worker, signal.SIGKILL)
    _stdout, stderr = batch.communicate(timeout=300)
    assert batch.returncode == 0, stderr
    lines = {line["job"]: line for line in outcome_lines(out)}
    assert lines["slow"]["status"] == "completed", lines["slow"]
    assert lines["slow"]["pid"] != worker  # run again, by another worker
    assert "+++ b/hello.py" in (out / "slow" / "changes.patch").read_text()


def test_a_node_that_cannot_sandbox_refuses_its_jobs_with_the_reason(
    tmp_path: Path, repo: Path, jobs_file: JobsFile
) -> None:
    out = tmp_path / "out"
    full = {**demo_job("full", repo), "capability": "full-access"}
    ceiling = tmp_path / "ceiling.toml"
    ceiling.write_text('max_capability = "full-access"\nallowed_agents = ["demo"]\n')
    with LocalRay(num_cpus=1, env={"ACP_GOVERNOR_BWRAP": "/bin/false"}) as broken:
        batch = _batch(
            jobs_file([demo_job("sandboxed", repo), full]),
            out,
            broken.address,
            "--ceiling",
            str(ceiling),
        )
        _, stderr = batch.communicate(timeout=300)
    assert batch.returncode == 1, stderr
    assert "cannot sandbox" in stderr
    lines = {line["job"]: line for line in outcome_lines(out)}
    assert lines["sandboxed"]["status"] == "failed"
    assert "refused before start: node" in lines["sandboxed"]["reason"]
    assert "cannot sandbox" in lines["sandboxed"]["reason"]
    assert lines["full"]["status"] == "completed"  # full-access needs no sandbox


def test_without_ray_installed_the_error_says_how_to_install_it(
    tmp_path: Path, repo: Path, jobs_file: JobsFile
) -> None:
    code = (
        "import sys; sys.modules['ray'] = None; from governor.cli import main; "
        f"sys.exit(main(['batch', {str(jobs_file([demo_job('a', repo)]))!r}, '--out', "
        f"{str(tmp_path / 'out')!r}, '--ray', 'auto']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "pip install 'acp-governor[ray]'" in done.stderr
    assert not (tmp_path / "out").exists()


SCRIPTED = Path(__file__).parents[1] / "audit" / "scripted_agent.py"


@pytest.fixture
def outside_homes() -> Iterator[Path]:
    """A folder outside every home and temporary folder (``/var/lib``), where a
    person keeps a batch's results; made by root, removed after."""
    import shutil

    if os.getuid() != 0:
        pytest.skip("making a folder outside the homes needs root")
    base = Path("/var/lib") / f"acp-governor-ray-{os.urandom(3).hex()}"
    base.mkdir(mode=0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_job_on_ray_reads_no_other_jobs_results_nor_the_jobs_file(
    repo: Path, outside_homes: Path, cluster: LocalRay
) -> None:
    """The batch's own paths are hidden from a job's sandboxes on a Ray worker as
    on the local pool (`governor.batch.runner.operator_paths`, sent with each
    task): job a, run after job b (one task in flight), reads ``OUT/b``'s
    patch, ``outcomes.jsonl`` and the jobs file with its own shell and keeps
    what it found; its patch holds none of it. The neighbour: b's own patch
    holds its answer, and both complete."""
    out, jobs = outside_homes / "out", outside_homes / "jobs.jsonl"
    answer = "THE-ANSWER-OF-JOB-B-" + os.urandom(4).hex()
    held = "a-check-of-b-" + os.urandom(4).hex()

    def job(name: str, shell: str, **more: Any) -> dict[str, Any]:
        script = outside_homes / f"{name}.json"
        script.write_text(json.dumps([{"shell": shell}, {"say": "Done."}]))
        return {"id": name, "prompt": "go", "repo": str(repo), "capability": "edit-workspace",
                "timeout": 120, "argv": [sys.executable, str(SCRIPTED), "--script", str(script)],
                **more}  # fmt: skip

    steal = f"cd {{cwd}} && (cat {out}/b/changes.patch {out}/outcomes.jsonl {jobs}; true) > leaked.txt 2>&1"
    lines = [job("b", f"cd {{cwd}} && echo {answer} > answer.txt", checks=[f"echo {held}"]),
             job("a", steal)]  # fmt: skip
    jobs.write_text("".join(json.dumps(j) + "\n" for j in lines))
    batch = _batch(jobs, out, cluster.address, "--jobs", "1")
    stdout, stderr = batch.communicate(timeout=600)
    found = {line["job"]: line["status"] for line in outcome_lines(out)}
    assert found == {"b": "completed", "a": "completed"}, stdout[-2000:] + stderr[-3000:]
    assert answer in (out / "b" / "changes.patch").read_text()
    stolen = (out / "a" / "changes.patch").read_text()
    assert "b/leaked.txt" in stolen
    assert answer not in stolen and held not in stolen, stolen[:2000]
