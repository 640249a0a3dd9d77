"""Attempts per minute of `governor batch`: N demo jobs on the local pool at
``--jobs 1, 2, 4`` and on a local Ray cluster with 1 and 2 workers, against N
sequential `governor run`s measured in the same run; the peak memory per
running attempt.

Every job is the bundled demo agent at edit-workspace in a fresh clone of one
small repository. The baseline, per job: ``git clone`` then ``governor run``
(a process each, as a shell loop would run them). A batch clones, runs and
diffs each job, all in one process (local) or in Ray's workers.

Memory: the proportional set size (PSS: shared pages split among their
processes) of everything that runs attempts -- the `governor batch` process
and its descendants (agents, sandboxes, fork servers), and for Ray the
cluster's processes too -- sampled every 0.2 s. Per running attempt: the
peak over the batch minus the same processes idle (for Ray: the cluster
before the batch; locally: nothing), divided by the attempts at once.

Ray's overhead per attempt: (wall time on Ray with W workers - wall time of
the local pool at ``--jobs W``) x W / N, i.e. the worker-seconds Ray adds to
each attempt (scheduling, moving the job in and the result out, its worker
processes); a Ray worker is a CPU (``ray start --num-cpus W``, each task
declaring 1).

Checks (``--checks``): the same N jobs on the local pool at ``--jobs 2``, each
with a check after its attempt (``python3 hello.py``: the program the demo
agent wrote, run in a fresh sandbox of its own, network off, the workspace an
overlay), against the same jobs without, rounds interleaved in the same run:
attempts per minute of each, their ratio, the seconds a check adds to an
attempt ((wall with - wall without) x jobs at once / N) and the check's own
duration as its outcome reports it (its sandbox's start included), median.

    .venv/bin/python bench/batch.py                  # N = 100
    .venv/bin/python bench/batch.py --jobs-count 20  # a quick run
    .venv/bin/python bench/batch.py --checks --rounds 3   # with checks against without
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

# Run as a script, this file has bench/ first on sys.path, and bench/ holds scripts
# whose names shadow packages (a script named like a package, as bench/sandbox.py was): keep bench/ off, the project on.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests" / "batch")]

BIN = Path(sys.executable).parent
GOVERNOR = str(BIN / "governor")
EDIT = str(HERE.parent / "policies" / "edit-workspace.toml")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            tree.setdefault(parent, []).append(int(entry))
    return tree


def pss_mb(roots: Iterable[int]) -> float:
    """PSS of these processes and all their descendants, in MB."""
    tree = _children()
    total, todo, seen = 0, list(roots), set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        todo += tree.get(pid, [])
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            continue
    return total / 1024


class Sampler:
    """The peak of `pss_mb` over ``roots()`` while the block runs (a thread)."""

    def __init__(self, roots: Callable[[], list[int]]) -> None:
        self.roots = roots
        self.peak = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._done.wait(0.2):
            self.peak = max(self.peak, pss_mb(self.roots()))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid"}
    env |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid"}
    (repo / "README.md").write_text("# bench\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "first"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    return repo


CHECK_PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "python3"
CHECK = f"{CHECK_PYTHON} hello.py"
"""The check of ``--checks``: the demo agent's program, run by an interpreter every sandbox shows."""


def write_jobs(root: Path, repo: Path, count: int, checks: tuple[str, ...] = ()) -> Path:
    path = root / ("jobs-checks.jsonl" if checks else "jobs.jsonl")
    with path.open("w") as f:
        for n in range(count):
            job = {
                "id": f"job-{n:03d}",
                "prompt": "Write a hello program and run it",
                "agent": "demo",
                "repo": str(repo),
                "policy": EDIT,
                "timeout": 300,
            }
            if checks:
                job["checks"] = list(checks)
            f.write(json.dumps(job) + "\n")
    return path


def sequential(root: Path, repo: Path, count: int) -> dict[str, Any]:
    """``git clone`` + ``governor run`` per job, one after the other."""
    started = time.monotonic()
    failed = 0
    for n in range(count):
        ws = root / "seq" / f"ws-{n}"
        subprocess.run(["git", "clone", "-q", str(repo), str(ws)], check=True)
        done = subprocess.run(
            [GOVERNOR, "run", "--agent", "demo", "--policy", EDIT, "--workspace", str(ws),
             "--log", str(root / "seq" / f"log-{n}.jsonl"), "--json", "Write a hello program and run it"],
            capture_output=True,
        )  # fmt: skip
        failed += done.returncode != 0
    wall = time.monotonic() - started
    shutil.rmtree(root / "seq", ignore_errors=True)
    return {"wall_s": wall, "per_min": count / wall * 60, "not_completed": failed}


def batch(
    root: Path, jobs: Path, count: int, args: list[str], idle: Callable[[], list[int]] | None = None
) -> dict[str, Any]:
    """One `governor batch` run (a fresh --out), timed, its memory sampled."""
    out = Path(tempfile.mkdtemp(prefix="out-", dir=root))
    base = pss_mb(idle()) if idle is not None else 0.0
    started = time.monotonic()
    process = subprocess.Popen(
        [GOVERNOR, "batch", str(jobs), "--out", str(out), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def roots() -> list[int]:
        return [process.pid, *(idle() if idle is not None else [])]

    with Sampler(roots) as sampler:
        _, stderr = process.communicate()
    wall = time.monotonic() - started
    lines = [json.loads(x) for x in (out / "outcomes.jsonl").read_text().splitlines()]
    completed = sum(1 for x in lines if x["status"] == "completed")
    verdicts = [x.get("verdict") for x in lines]
    check_s = sorted(sum(c["duration_s"] for c in x.get("checks_run", [])) for x in lines)
    if completed != count:
        print(f"  warning: {count - completed} job(s) did not complete:\n{stderr[-2000:]}")
    shutil.rmtree(out, ignore_errors=True)
    job_s = sorted(x["job_s"] for x in lines)
    return {
        "wall_s": wall,
        "per_min": count / wall * 60,
        "completed": completed,
        "peak_mb": sampler.peak,
        "idle_mb": base,
        "job_s_median": job_s[len(job_s) // 2] if job_s else None,
        "passed": verdicts.count("passed"),
        "check_s_median": check_s[len(check_s) // 2] if check_s else None,
    }


def with_checks(root: Path, repo: Path, count: int, rounds: int, level: int) -> dict[str, Any]:
    """The jobs with a check against the same jobs without, rounds interleaved."""
    plain = write_jobs(root, repo, count)
    checked = write_jobs(root, repo, count, (CHECK,))
    walls: dict[str, list[float]] = {"without": [], "with": []}
    own: list[float] = []
    for n in range(rounds):
        for name, jobs in (("without", plain), ("with", checked)):
            r = batch(root, jobs, count, ["--jobs", str(level)])
            walls[name].append(r["wall_s"])
            if name == "with":
                own.append(r["check_s_median"])
            if name == "with" and r["passed"] != count:
                print(f"  warning: {count - r['passed']} check(s) did not pass")
            print(f"  round {n + 1}, {name} checks: {r['wall_s']:.1f} s, {r['per_min']:.0f} attempts/min")
    without, with_ = sorted(walls["without"])[rounds // 2], sorted(walls["with"])[rounds // 2]
    return {
        "level": level,
        "without_per_min": count / without * 60,
        "with_per_min": count / with_ * 60,
        "ratio": without / with_,
        "check_s_per_attempt": (with_ - without) * level / count,
        "check_own_s_median": sorted(own)[rounds // 2],
        "walls": walls,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--jobs-count", type=int, default=100, help="demo jobs per run (default 100)"
    )
    parser.add_argument("--levels", default="1,2,4", help="local --jobs levels (default 1,2,4)")
    parser.add_argument("--ray-workers", default="1,2", help="Ray cluster sizes (default 1,2)")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray runs")
    parser.add_argument(
        "--checks",
        action="store_true",
        help="only: jobs with a check against the same jobs without (local --jobs 2)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --checks (default 3)")
    args = parser.parse_args()
    count = args.jobs_count
    levels = [int(x) for x in args.levels.split(",")]
    workers = [] if args.no_ray else [int(x) for x in args.ray_workers.split(",")]
    load = os.getloadavg()[0]
    print(f"{count} demo jobs; load average {load:.1f}; {os.cpu_count()} cores")
    results: dict[str, dict[str, Any]] = {}
    if args.checks:
        with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
            root = Path(tmp)
            r = results["checks"] = with_checks(root, make_repo(root), count, args.rounds, 2)
        print(
            f"local --jobs 2, median of {args.rounds}: without checks {r['without_per_min']:.0f} "
            f"attempts/min, with a check {r['with_per_min']:.0f} = {r['ratio']:.2f} x; "
            f"a check adds {r['check_s_per_attempt']:.3f} s per attempt (its own duration, "
            f"sandbox included: median {r['check_own_s_median']:.3f} s)"
        )
        print(json.dumps({"jobs": count, "load": load, **results}, indent=1))
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        root = Path(tmp)
        repo = make_repo(root)
        jobs = write_jobs(root, repo, count)
        results["sequential"] = seq = sequential(root, repo, count)
        print(f"sequential governor run: {seq['wall_s']:.1f} s, {seq['per_min']:.0f} attempts/min")
        for level in levels:
            r = results[f"local-{level}"] = batch(root, jobs, count, ["--jobs", str(level)])
            per = r["peak_mb"] / level
            print(
                f"local --jobs {level}: {r['wall_s']:.1f} s, {r['per_min']:.0f} attempts/min "
                f"= {r['per_min'] / seq['per_min']:.2f} x sequential; peak PSS {r['peak_mb']:.0f} MB "
                f"({per:.0f} MB per running attempt); median job {r['job_s_median']:.2f} s"
            )
        if workers:
            from ray_cluster import LocalRay

            for w in workers:
                with LocalRay(num_cpus=w) as cluster:
                    time.sleep(2)  # let the cluster settle (its prestarted workers)
                    r = results[f"ray-{w}"] = batch(
                        root, jobs, count, ["--ray", cluster.address], idle=cluster.pids
                    )
                local = results.get(f"local-{w}")
                per = (r["peak_mb"] - r["idle_mb"]) / w
                overhead = (
                    f"; overhead per attempt {(r['wall_s'] - local['wall_s']) * w / count:.3f} s "
                    f"(vs local --jobs {w})"
                    if local
                    else ""
                )
                print(
                    f"ray, {w} worker(s): {r['wall_s']:.1f} s, {r['per_min']:.0f} attempts/min "
                    f"= {r['per_min'] / seq['per_min']:.2f} x sequential; cluster idle "
                    f"{r['idle_mb']:.0f} MB, peak {r['peak_mb']:.0f} MB ({per:.0f} MB per running "
                    f"attempt){overhead}; median job {r['job_s_median']:.2f} s"
                )
    print(json.dumps({"jobs": count, "load": load, **results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
