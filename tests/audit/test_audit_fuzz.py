"""Crafted logs and outcome lines against every audit reader: none crashes.

The table, ``--json``, ``--refused``, ``--network``, ``--attempt``, ``verify``,
``report`` and ``replay`` read logs anyone who can write the file could have
crafted (`log_fuzz`); each must answer with its output or a clear error (exit 1
or 2, the file and line named), never a traceback. Bounded here; the long run
is ``bench/audit_fuzz.py``.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from log_fuzz import sealed, write_batch, write_log
from reader_runs import batch_views, crashes, run, views

GOVERNOR = Path(sys.executable).with_name("governor")


def policy(tmp: Path) -> Path:
    path = tmp / "policy.toml"
    path.write_text('capability = "edit-workspace"\n', encoding="utf-8")
    return path


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), records=st.integers(1, 14))
def test_no_crafted_log_crashes_a_reader(tmp_path: Path, seed: int, records: int) -> None:
    rng = random.Random(seed)
    log = tmp_path / "audit.jsonl"
    write_log(log, rng, records)
    assert crashes(views(log, policy(tmp_path), tmp_path / "page.html")) == []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
@example(seed=1875)  # a subject whose `paths` is a number crashed the batch report (CI, 2026-12-03)
def test_no_crafted_outcome_line_crashes_a_batch_reader(tmp_path: Path, seed: int) -> None:
    root = tmp_path / f"out{seed}"
    write_batch(root, random.Random(seed), jobs=3, records=4)
    assert crashes(batch_views(root)) == []


def start(**fields: object) -> bytes:
    return sealed({"seq": 1, "time": 1.7e9, "attempt": "a1", "kind": "attempt-start", **fields,
                   "prev": None})  # fmt: skip


def test_a_record_whose_kind_is_an_object_is_an_error_naming_the_file_line_and_field(
    tmp_path: Path,
) -> None:
    log = tmp_path / "audit.jsonl"
    first = start(agent="x")
    second = sealed({"seq": 2, "time": 1.7e9, "attempt": "a1", "kind": {"k": 1},
                     "prev": json.loads(first)["hash"]})  # fmt: skip
    log.write_bytes(first + b"\n" + second + b"\n")
    for argv in ([str(log)], ["--attempt", "a1", str(log)], ["report", str(log), "-o", "-"]):
        code, out, err = run(argv)
        assert code == 1, argv
        assert f"{log}: line 2 is not a record the governor writes: its 'kind' is an object" in err
    code, out, _ = run(["verify", str(log)])
    assert code == 1 and "TAMPERED: line 2 is not a record the governor writes" in out
    good = tmp_path / "good.jsonl"
    good.write_bytes(first + b"\n")  # the same log without the crafted record reads
    assert run([str(good)])[0] == 0 and run(["verify", str(good)])[0] == 0


def test_a_time_past_any_clock_is_refused_and_a_real_one_is_printed(tmp_path: Path) -> None:
    for at, code in ((1e300, 1), (1.7e9, 0)):
        log = tmp_path / f"audit-{at}.jsonl"
        line = sealed({"seq": 1, "time": at, "attempt": "a1", "kind": "attempt-start",
                       "prev": None})  # fmt: skip
        log.write_bytes(line + b"\n")
        got, _, err = run(["--attempt", "a1", str(log)])
        assert got == code, err
        assert ("its 'time' is 1e+300 seconds" in err) == (code == 1)


def test_nesting_of_a_thousand_is_a_line_that_is_not_a_record_not_a_crash(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    log.write_bytes(start(agent="x") + b"\n" + b"[" * 1000 + b"]" * 1000 + b"\n")
    for argv in ([str(log)], ["verify", str(log)], ["report", str(log), "-o", "-"]):
        code, out, err = run(argv)
        assert code in (0, 1) and "line 2" in out + err, argv


def test_a_batch_outcome_whose_tally_is_no_counts_names_its_file_and_line(tmp_path: Path) -> None:
    root = tmp_path / "out"
    for job in ("j1", "j2"):
        (root / job).mkdir(parents=True)
        (root / job / "audit.jsonl").write_bytes(b"")
        (root / job / "changes.patch").write_bytes(b"")
    lines = [{"job": "j1", "status": "completed", "acp": {"tally": {"asked": 2}}},
             {"job": "j2", "status": "failed", "acp": {"tally": {"asked": "lots"}}}]  # fmt: skip
    (root / "outcomes.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    code, _, err = run([str(root)])
    assert code == 1
    assert f"{root / 'outcomes.jsonl'}: line 2 is not a record the governor writes: job j2: its tally's 'asked' is a string" in err  # fmt: skip
    lines[1]["acp"] = {"tally": {"asked": 3}}
    (root / "outcomes.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    code, out, _ = run([str(root)])
    assert code == 0 and "5 asked" in out


def test_the_console_script_answers_crafted_logs_with_an_error_never_a_traceback(
    tmp_path: Path,
) -> None:
    rng = random.Random(30)
    logs = []
    for n in range(6):
        log = tmp_path / f"audit{n}.jsonl"
        write_log(log, rng, 10)
        logs.append(log)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(start(agent="x", tally="many") + b"\n")
    for log in [*logs, bad]:
        for argv in (["audit", str(log)], ["audit", "verify", str(log)],
                     ["audit", "report", str(log), "--attempt", "a1", "-o", str(tmp_path / "p.html")]):  # fmt: skip
            done = subprocess.run([str(GOVERNOR), *argv], capture_output=True, text=True, timeout=120)
            assert done.returncode in (0, 1, 2) and "Traceback" not in done.stderr, (argv, done.stderr)
    done = subprocess.run([str(GOVERNOR), "audit", str(bad)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert f"{bad}: line 1 is not a record the governor writes: its 'tally' is a string" in done.stderr
