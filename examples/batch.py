"""An evaluation around acp-governor: several tasks at once, each judged by its patch.

Build the jobs (one per task, each in a fresh clone of the same repository at
the same ref), run them as one batch, then check each job's patch the way a
grader would: apply it to a clean clone at that ref and run the task's own
test there, outside any agent. Rerun it with the same ``--out`` and the
finished jobs are skipped (only the grading runs again). Runs as-is against
the bundled demo agent and a throwaway repository:

    .venv/bin/python examples/batch.py --out "$(mktemp -d)/out"

Give ``--repo`` (a path or a git URL) and ``--agent`` (``claude``, ``codex``...)
for real work; ``--ray auto`` sends the jobs to a Ray cluster instead.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from governor.batch import BadJobs, Job, JobOutcome, run_batch

POLICY = "edit-workspace"  # the shipped policy, by name

TASKS = {
    "hello": "Write hello.py that prints a greeting, and run it.",
    "hello-again": "Add hello.py printing a greeting; run it to check.",
    "hello-third": "Create a hello program in hello.py and run it once.",
}


def grade(job: JobOutcome, repo: str, ref: str) -> tuple[bool, str]:
    """Apply the job's patch to a clean clone at its ref and run the task's test."""
    with tempfile.TemporaryDirectory() as tmp:
        clean = Path(tmp) / "clean"
        subprocess.run(["git", "clone", "-q", repo, str(clean)], check=True)
        subprocess.run(["git", "checkout", "-q", "--detach", ref], cwd=clean, check=True)
        applied = subprocess.run(
            ["git", "apply", "--index", str(job.changes)], cwd=clean, capture_output=True, text=True
        )
        if applied.returncode != 0:
            return False, f"the patch does not apply: {applied.stderr.strip()}"
        if not (clean / "hello.py").exists():
            return False, "no hello.py in the patch"
        run = subprocess.run(
            [sys.executable, "hello.py"], cwd=clean, capture_output=True, text=True, timeout=30
        )
        ok = run.returncode == 0 and "hello" in run.stdout
        return ok, run.stdout.strip() or run.stderr.strip()


def throwaway_repo(where: Path) -> str:
    """A one-commit repository to work on when none is given (the same one again
    on a rerun)."""
    repo = where / "repo"
    if (repo / ".git").is_dir():
        return str(repo)
    repo.mkdir(parents=True)
    (repo / "README.md").write_text("# a project\n")
    who = ["-c", "user.name=example", "-c", "user.email=example@example.invalid"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    subprocess.run(["git", *who, "commit", "-qm", "start"], cwd=repo, check=True)
    return str(repo)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the batch's output folder")
    parser.add_argument("--repo", help="a path or git URL (default: a throwaway repository)")
    parser.add_argument("--ref", default="HEAD")
    parser.add_argument("--agent", default="demo")
    parser.add_argument("--jobs", type=int, default=None, help="attempts at once")
    parser.add_argument("--ray", default=None, help="a Ray cluster's address")
    args = parser.parse_args()

    repo = args.repo or throwaway_repo(args.out.parent / "example-repo")
    jobs = [
        Job(
            id=name,
            prompt=task,
            agent=args.agent,
            repo=repo,
            ref=args.ref,
            policy=POLICY,
            append_rules=True,
            timeout=600,
        )
        for name, task in TASKS.items()
    ]
    try:
        result = run_batch(jobs, args.out, parallel=args.jobs, ray=args.ray)
    except BadJobs as e:
        print(f"refused before start:\n{e}", file=sys.stderr)
        return 2
    passed = 0
    for job in result.results:
        ok, why = grade(job, repo, job.line.get("commit") or args.ref)
        passed += ok
        earlier = " (finished by an earlier run)" if job.earlier else ""
        print(f"{job.job}: {job.status}{earlier}; graded {'PASS' if ok else 'FAIL'}: {why}")
    print(f"{passed}/{len(jobs)} passed; outcomes and logs in {result.out}")
    return 0 if passed == len(jobs) else 1


if __name__ == "__main__":
    sys.exit(main())
