"""A batch job's ``checks``: carried to its attempt after the policy's, a bad
value named with its line and key."""

from __future__ import annotations

from governor.batch.jobs import parse_job

JOB = {"id": "a", "prompt": "fix it", "repo": "/src/repo", "agent": "demo"}


def test_a_jobs_checks_reach_its_attempt() -> None:
    job, problems = parse_job({**JOB, "checks": ["pytest -q", "ruff check"]}, line=3)
    assert problems == [] and job is not None
    assert list(job.spec("/ws", "/log/audit.jsonl").checks) == ["pytest -q", "ruff check"]
    plain, _ = parse_job(JOB, line=4)
    assert plain is not None and list(plain.spec("/ws", "/log").checks) == []


def test_a_bad_checks_value_names_its_line_and_key() -> None:
    job, problems = parse_job({**JOB, "checks": "pytest -q"}, line=7)
    assert job is None
    assert problems == ["line 7: key 'checks': expected an array of non-empty strings, got a string"]
