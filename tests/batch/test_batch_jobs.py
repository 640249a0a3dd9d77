"""The jobs file: every bad line named (line, key, why) before anything runs."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from conftest import GOVERNOR, demo_job

from governor.batch.jobs import BadJobs, Job, as_jobs, parse_jobs

JobsFile = Callable[[Iterable[dict[str, Any]]], Path]


def test_every_bad_line_is_named_with_its_key_and_nothing_runs(
    tmp_path: Path, repo: Path, jobs_file: JobsFile
) -> None:
    good = demo_job("good", repo)
    path = jobs_file([good])
    path.write_text(
        "\n".join(
            [
                json.dumps(good),
                "{not json",
                json.dumps({**good, "prompt": "again"}),  # line 3: the id of line 1
                json.dumps({"id": "x", "promt": "typo", "agent": "demo", "repo": str(repo)}),
                json.dumps({**demo_job("ws", repo), "workspace": "/tmp", "timeout": 0}),
                json.dumps({**demo_job("both", repo), "argv": ["my-agent"]}),
                json.dumps({**demo_job("cap", repo), "capability": "full-access"}),
                json.dumps({**demo_job("ref", repo), "ref": "no-such-ref"}),
                json.dumps({**demo_job("norepo", repo), "repo": "missing"}),
                json.dumps(
                    {**demo_job("pol", repo), "policy": "nope.toml", "env": ["UNSET_VAR_X"]}
                ),
                json.dumps([1, 2]),
                json.dumps({**demo_job("bad/id", repo)}),
            ]
        )
        + "\n"
    )
    out = tmp_path / "out"
    done = subprocess.run(
        [str(GOVERNOR), "batch", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert not out.exists()  # nothing ran, nothing was written
    said = done.stderr
    for expected in [
        "line 2: not JSON",
        "line 3: key 'id': 'good' is already the id of line 1",
        "line 4: unknown key 'promt' (did you mean 'prompt'?)",
        "line 4: key 'prompt': missing",
        "line 5: key 'workspace': the batch makes each job's workspace",
        "line 5: key 'timeout': expected a number of seconds greater than 0, got 0",
        "line 6: key 'agent': give either `agent` (a preset id) or `argv`",
        "line 7 (cap): refused by the ceiling",
        "line 8 (ref): key 'ref':",
        "line 9 (norepo): key 'repo':",
        "line 10 (pol): key 'policy':",
        "line 10 (pol): required environment variables are unset or empty: UNSET_VAR_X",
        "line 11: a job is a JSON object, not an array",
        "line 12: key 'id': expected 1 to 128 letters",
        "nothing was run",
    ]:
        assert expected in said, (expected, said)
    assert "line 1:" not in said and "line 1 (" not in said
    lines = [n for n in said.splitlines() if "line " in n]
    numbers = [int(n.split("line ")[1].split()[0].rstrip(":")) for n in lines]
    assert numbers == sorted(numbers)  # in the file's order


def test_a_job_may_not_name_what_the_batch_decides() -> None:
    for key in ("workspace", "log", "ceiling", "approver", "environ"):
        with pytest.raises(BadJobs, match=f"key '{key}'"):
            parse_jobs(
                json.dumps({"id": "a", "prompt": "p", "agent": "demo", "repo": ".", key: "x"})
            )


def test_jobs_given_as_dicts_and_jobs_are_checked_alike() -> None:
    jobs = as_jobs(
        [{"id": "a", "prompt": "p", "agent": "demo", "repo": "."}, Job("b", "p", ".", agent="demo")]
    )
    assert [j.id for j in jobs] == ["a", "b"]
    with pytest.raises(BadJobs) as e:
        as_jobs([{"id": "a", "prompt": "p", "agent": "demo", "repo": "."}] * 2)
    assert e.value.problems == ["job 2: key 'id': 'a' is already the id of job 1"]


def test_an_empty_jobs_file_is_an_error() -> None:
    with pytest.raises(BadJobs, match="holds no job"):
        parse_jobs("\n\n")


def test_a_job_line_round_trips_through_its_json() -> None:
    line = {
        "id": "a",
        "prompt": "p",
        "argv": ["x", "--acp"],
        "repo": ".",
        "env": ["CI"],
        "timeout": 60,
    }
    (job,) = parse_jobs(json.dumps(line))
    assert job.argv == ("x", "--acp") and job.env == ("CI",) and job.timeout == 60.0
    assert job.to_json() == {**line, "timeout": 60.0}
