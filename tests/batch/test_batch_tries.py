"""A batch job's ``tries``: a whole number from 1 to 20, with checks to fail; a
bad value named with its line and key."""

from __future__ import annotations

import pytest

from governor.batch.jobs import parse_job

JOB = {"id": "a", "prompt": "fix it", "repo": "/src/repo", "agent": "demo"}


def test_a_jobs_tries_are_kept_with_its_checks() -> None:
    job, problems = parse_job({**JOB, "checks": ["pytest -q"], "tries": 3}, line=2)
    assert problems == [] and job is not None and job.tries == 3
    assert job.to_json()["tries"] == 3
    plain, _ = parse_job(JOB, line=3)
    assert plain is not None and plain.tries == 1 and "tries" not in plain.to_json()


@pytest.mark.parametrize(
    ("value", "got"),
    [(0, "0"), (21, "21"), (2.5, "a number"), ("3", "a string"), (True, "a boolean"), (None, "null")],
)
def test_a_bad_number_of_tries_names_its_line_and_key(value: object, got: str) -> None:
    job, problems = parse_job({**JOB, "checks": ["true"], "tries": value}, line=7)
    assert job is None
    assert problems == [f"line 7: key 'tries': expected a whole number from 1 to 20, got {got}"]


def test_tries_without_checks_are_refused_naming_the_key() -> None:
    job, problems = parse_job({**JOB, "tries": 2}, line=4)
    assert job is None
    assert problems == [
        "line 4: key 'tries': a try follows only a failed verdict, and this job has no "
        "checks: give it `checks` (or a policy with [checks] commands)"
    ]
