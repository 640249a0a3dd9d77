"""Loud globs and the honest way out through the real `governor batch`, with the
task set's scripted agent: a job whose frozen glob matches nothing in its clone
is refused at its start naming the glob, and its neighbour with a matching glob
passes with the frozen files counted; a job holding out files its repository
tracks is refused saying why; a job whose agent says it is blocked (a final
``BLOCKED:``, or the governor's ``blocked`` tool) ends ``blocked`` after one
try of three, while a failing job's tries go on."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "taskset"))
from tasks import AGENT, AGENT_ARGS, BY_NAME, check_command, make_repo

GOVERNOR = str(Path(sys.executable).parent / "governor")
CHECK_PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "python3"
POLICIES = {
    "loop.toml": '[sandbox]\nfrozen = ["tests/acceptance/**"]\n',
    "case.toml": '[sandbox]\nfrozen = ["tests/Acceptance/**"]\n',
    "tools.toml": '[sandbox]\nfrozen = ["tests/acceptance/**"]\n[mcp]\ngovernor_tools = true\n',
}
JOBS: list[tuple[str, str, str, dict[str, Any]]] = [
    ("honest", "add", "loop.toml", {}),
    ("honest", "add", "case.toml", {}),
    ("honest", "add", "loop.toml", {"held_out": ["tests/acceptance/**"]}),
    ("blocked", "add", "loop.toml", {"tries": 3}),
    ("blocked-tool", "add", "tools.toml", {"tries": 3}),
    ("second-try", "add", "loop.toml", {"tries": 3}),
]


def _batch(tmp_path: Path) -> dict[str, dict[str, Any]]:
    repo = tmp_path / "repo"
    ref = make_repo(BY_NAME["add"], repo)
    for name, text in POLICIES.items():
        (tmp_path / name).write_text('capability = "edit-workspace"\n' + text)
    lines = []
    for n, (behaviour, task, policy, more) in enumerate(JOBS):
        job = {
            "id": f"{n}-{behaviour}-{policy.removesuffix('.toml')}",
            "prompt": "fix it",
            "repo": str(repo),
            "ref": ref,
            "argv": [sys.executable, str(AGENT), *AGENT_ARGS, "--behaviour", behaviour, "--task", task],
            "policy": str(tmp_path / policy),
            "checks": [check_command(BY_NAME[task], CHECK_PYTHON)],
            "timeout": 120,
            **more,
        }
        lines.append(json.dumps(job))
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    done = subprocess.run(
        [GOVERNOR, "batch", str(jobs), "--out", str(out), "--jobs", "2"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]  # some jobs did not complete, as meant
    found = [json.loads(line) for line in (out / "outcomes.jsonl").read_text().splitlines()]
    return {line["job"].split("-", 1)[0]: line for line in found}


def test_loud_globs_and_the_honest_way_out_through_governor_batch(tmp_path: Path) -> None:
    by = _batch(tmp_path)
    # a matching frozen glob: the job runs, the outcome counts the frozen files
    honest = by["0"]
    assert (honest["status"], honest["verdict"]) == ("completed", "passed")
    assert honest["frozen"]["start"]["files"] == 2 and honest["frozen"]["start"] == honest["frozen"]["end"]
    # the same glob but for case: refused at the job's start, naming it
    case = by["1"]
    assert case["exit_code"] == 2 and case["reason"].startswith("refused before start")
    assert "[sandbox] frozen 'tests/Acceptance/**' matches nothing" in case["reason"]
    assert "'tests/acceptance' differs only in case" in case["reason"]
    # held-out files the clone tracks: refused, saying why
    tracked = by["2"]
    assert tracked["exit_code"] == 2 and "git tracks tests/acceptance" in tracked["reason"]
    # blocked, either way: one try of three, the reason kept
    said = by["3"]
    assert (said["status"], said["reason"]) == ("blocked", "the task contradicts the spec")
    assert len(said["tries"]) == 1
    tool = by["4"]
    assert (tool["status"], tool["reason"]) == ("blocked", "the acceptance test asserts what the spec forbids")
    assert len(tool["tries"]) == 1
    log = tmp_path / "out" / tool["job"] / "audit.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["reason"] for r in records if r["kind"] == "blocked"] == [tool["reason"]]
    # the neighbour: a failing job's tries go on
    failing = by["5"]
    assert [t["verdict"] for t in failing["tries"]] == ["failed", "passed"]
