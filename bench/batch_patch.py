"""The batch's memory against its patch's size: one job through the real
``governor batch`` whose agent writes N MB of random bytes into its
workspace; the batch process's own peak RSS (``getrusage(RUSAGE_SELF)``, git
and the agent not counted) and the patch's size.

    python bench/batch_patch.py [--mb 200] [--repo-root DIR]

``--repo-root``: the checkout whose ``governor`` runs (default: this one), to
measure another version with the same Python (``/tmp/main-checkout``); the
job's ``[limits] patch`` is set to 2G so that the patch is kept.
Prints the peak RSS of an empty job and of the big one, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
WRAPPER = (
    "import resource, runpy, sys\n"
    "sys.argv = ['governor', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('governor.cli', run_name='__main__')\n"
    "finally:\n"
    "    print('PEAK_KIB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
)


def run(root: Path, base: Path, mb: int) -> tuple[int, int]:
    """(peak RSS in KiB, patch bytes) of one batch whose job writes ``mb`` MB."""
    work = Path(tempfile.mkdtemp(prefix=f"job-{mb}-", dir=base))
    repo = work / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@example.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    (repo / "README.md").write_text("bench\n")
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "first"], cwd=repo, check=True)
    steps = [{"shell": f"head -c {mb * 1000 * 1000} /dev/urandom > {{cwd}}/big.bin"}, {"say": "done"}]
    (work / "script.json").write_text(json.dumps(steps))
    policy = work / "job.toml"
    knows = '"patch"' in (root / "policies" / "limits.py").read_text()  # an older checkout does not
    patch_limit = '[limits]\npatch = "2G"\n' if knows else ""
    policy.write_text(f'capability = "edit-workspace"\n{patch_limit}')
    agent = [sys.executable, str(root / "tests" / "audit" / "scripted_agent.py"), "--script", str(work / "script.json")]
    job = {"id": "big", "prompt": "write", "repo": str(repo), "argv": agent, "policy": str(policy), "timeout": 600}
    jobs = work / "jobs.jsonl"
    jobs.write_text(json.dumps(job) + "\n")
    env = {**os.environ, "PYTHONPATH": str(root), "TMPDIR": str(base)}
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, "batch", str(jobs), "--out", str(work / "out"), "--jobs", "1"],
        capture_output=True, text=True, env=env, timeout=1800,
    )  # fmt: skip
    peak = next(int(x.split()[1]) for x in done.stderr.splitlines() if x.startswith("PEAK_KIB"))
    line = json.loads((work / "out" / "outcomes.jsonl").read_text().splitlines()[0])
    assert line["status"] == "completed", line
    size = Path(line["changes"]).stat().st_size
    shutil.rmtree(work, ignore_errors=True)
    return peak, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--repo-root", type=Path, default=HERE)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-patch-", dir="/srv" if os.access("/srv", os.W_OK) else None))
    try:
        small, small_size = run(args.repo_root, base, 0)
        big, big_size = run(args.repo_root, base, args.mb)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{args.repo_root}: empty job: peak RSS {small / 1024:.0f} MiB (patch {small_size} B)")
    print(f"{args.repo_root}: {args.mb} MB job: peak RSS {big / 1024:.0f} MiB (patch {big_size / 2**20:.0f} MiB)")
    print(f"ratio big/empty: {big / small:.2f}")


if __name__ == "__main__":
    main()
