"""A batch's logs are checked against the heads on their outcome lines
(`governor audit verify --outcomes OUT/outcomes.jsonl`): real demo jobs, real
git, the real CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import GOVERNOR, demo_job, outcome_lines, quitting_job

from governor.audit.signing import KEY_VARIABLE
from governor.batch import run_batch


def verify(*args: str) -> tuple[int, str]:
    done = subprocess.run(
        [str(GOVERNOR), "audit", "verify", *args], capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout + done.stderr


def test_every_jobs_log_is_checked_against_its_outcome_line_and_a_swapped_or_dropped_one_fails(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = tmp_path / "audit.key"
    assert subprocess.run([str(GOVERNOR), "audit", "keygen", str(key)], timeout=60).returncode == 0
    monkeypatch.setenv(KEY_VARIABLE, key.read_text())
    out = tmp_path / "out"
    run_batch(
        [demo_job("one", repo), demo_job("two", repo), quitting_job("quits", repo)], out, parallel=2
    )
    lines = {line["job"]: line for line in outcome_lines(out)}
    for line in lines.values():
        assert len(line["log_head"]) == 64 and line["log_records"] >= 2, line
        assert line["log_key"] == lines["one"]["log_key"]
    outcomes = str(out / "outcomes.jsonl")
    code, text = verify("--outcomes", outcomes, "--public-key", f"{key}.pub")
    assert code == 0, text
    assert text.count("intact, anchored and signed") == 3
    # job two's log put in place of job one's: both genuine and signed, only the head tells
    original = (out / "one" / "audit.jsonl").read_bytes()
    shutil.copy(out / "two" / "audit.jsonl", out / "one" / "audit.jsonl")
    code, text = verify("--outcomes", outcomes, "--public-key", f"{key}.pub")
    assert code == 1, text
    assert f"attempt {lines['one']['run_id']} (outcomes.jsonl line" in text
    assert "is not in the log: dropped from it, or the log was replaced by another" in text
    assert f"attempt {lines['two']['run_id']} (its last record on line" in text
    # a job's log gone
    (out / "one" / "audit.jsonl").unlink()
    code, text = verify("--outcomes", outcomes)
    assert code == 1 and "TAMPERED: the log is missing (outcomes.jsonl line" in text, text
    # restored, it passes again; the batch folder moved elsewhere too
    (out / "one" / "audit.jsonl").write_bytes(original)
    moved = tmp_path / "moved"
    os.rename(out, moved)
    code, text = verify("--outcomes", str(moved / "outcomes.jsonl"))
    assert code == 0 and text.count("intact, anchored") == 3, text
