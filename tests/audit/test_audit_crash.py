"""Kill the governor with SIGKILL at random points of real attempts, fifty times:
every log still verifies (a line cut by the crash is reported, not taken for
tampering), and every decision the agent received is in the log -- written
ahead of its answer."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from audit_helpers import HERE, records

from governor.audit.verify import read_lines, verify

KILLS = 50
AT_ONCE = 5
KIND: dict[str, str] = {
    "session/request_permission": "permission",
    "fs/write_text_file": "write",
    "fs/read_text_file": "read",
}
REFUSED = -32001
GUARD = 30.0
"""Only a guard against a hang; never an assertion on speed."""


@contextlib.contextmanager
def driver() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "crash_driver.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=GUARD)


def start(proc: subprocess.Popen[str], base: Path, durability: str) -> int:
    assert proc.stdin is not None and proc.stdout is not None
    base.mkdir()
    proc.stdin.write(json.dumps({"dir": str(base), "durability": durability}) + "\n")
    proc.stdin.flush()
    return int(proc.stdout.readline())


def begun(log: Path) -> float:
    deadline = time.monotonic() + GUARD
    while not log.exists():
        assert time.monotonic() < deadline, f"no attempt began: {log}"
        time.sleep(0.002)
    return time.monotonic()


def gone(pid: int) -> None:
    deadline = time.monotonic() + GUARD
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.005)
    raise AssertionError(f"governor {pid} survived SIGKILL")


def agent_done(received: Path) -> None:
    """The agent holds a lock on its notes while it runs; it exits on EOF."""
    if not received.exists():
        return
    with received.open("a") as f:
        deadline = time.monotonic() + GUARD
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AssertionError("the agent did not exit after the governor died") from None
                time.sleep(0.01)


def answered(received: Path) -> list[dict[str, Any]]:
    """The decisions the agent received: answers, and refusals."""
    if not received.exists():
        return []
    notes = [json.loads(x) for x in received.read_text().splitlines() if x]
    return [n for n in notes if n["method"] in KIND and n["error"] in (None, REFUSED)]


def subject_key(record: dict[str, Any]) -> str | None:
    subject = record.get("subject") or {}
    return subject.get("tool_call") if record["kind"] == "permission" else subject.get("path")


def test_a_governor_killed_at_random_points_leaves_a_log_that_verifies_and_holds_every_answer(
    tmp_path: Path,
) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    logged_total = answered_total = unfinished = 0
    with driver() as proc:
        for round_ in range(KILLS // AT_ONCE):
            runs = []
            for k in range(AT_ONCE):
                n = round_ * AT_ONCE + k
                base = tmp_path / f"run{n:02d}"
                durability = "always" if n % 2 else "batch"
                runs.append((base, start(proc, base, durability), rng.uniform(0.1, 0.9)))
            # Each governor's clock starts when its first attempt has begun (its
            # log exists): every kill lands in an attempt, or between two.
            kills = sorted((begun(base / "audit.jsonl") + delay, pid) for base, pid, delay in runs)
            for at, pid in kills:
                time.sleep(max(0.0, at - time.monotonic()))
                os.kill(pid, signal.SIGKILL)
            for base, pid, _ in runs:
                gone(pid)
                agent_done(base / "received.jsonl")
                log = base / "audit.jsonl"
                note = f"seed {seed}, {base.name}"
                check = verify(read_lines(log))
                assert check.problem is None, (note, check.problem)
                assert set(check.incomplete) <= {check.records}, note
                unfinished += len(check.unfinished)
                logged = {
                    (r.get("session"), r["kind"], subject_key(r))
                    for r in records(log)
                    if r["kind"] in KIND.values()
                }
                answers = answered(base / "received.jsonl")
                for a in answers:
                    assert (a["session"], KIND[a["method"]], a["key"]) in logged, (note, a)
                logged_total += len(logged)
                answered_total += len(answers)
    # The kills landed in the middle of attempts, with answers to check.
    assert answered_total > 10 * KILLS and unfinished > KILLS // 2, (answered_total, unfinished)
    assert logged_total >= answered_total
    print(f"seed {seed}: {answered_total} answers checked, {unfinished} attempts cut short")
