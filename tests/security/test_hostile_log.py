"""The audit log as a weapon: an agent that floods its requests cannot grow
the log (or the workspace) without bound, and the log loses nothing that was
answered. Real attempts (``governor run`` as root and as govtest, the flood
agent flood_agent.py over real stdio, the real proxy, gate and log), and the
real proxy alone through egress_driver.py.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from escape_harness import REPO, USERS, Account, Box
from test_escapes_network import RAW, Run, attack, lines, refused

AGENT = Path(__file__).with_name("flood_agent.py")
__all__ = ["attack"]  # the fixture, shared with the network escapes


@pytest.fixture
def upstream() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections (an allowed server)."""
    server = socket.create_server(("127.0.0.1", 0), backlog=64)
    done = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    done.set()
    thread.join()
    server.close()


def attempt_box(accounts: dict[str, Account | str], user: str, name: str) -> Box:
    account = accounts[user]
    if isinstance(account, str):
        pytest.skip(f"{user}: {account}")
    assert account.base is not None
    return Box(user, account, account.base / f"{name}-{os.urandom(3).hex()}")


def governor_run(
    box: Box, name: str, policy: str, agent: list[str], *flags: str, environ: dict[str, str] | None = None
) -> tuple[dict[str, Any], Path]:
    """``governor run --json`` as the box's user with the flood agent; the
    outcome and the log."""
    policy_path = box.write(box.dir / f"{name}.toml", f'capability = "edit-workspace"\n{policy}\n')
    log = box.dir / f"{name}.jsonl"
    driver = box.account.driver
    if driver is not None:
        args = [str(a) for a in driver.proc.args]  # runuser ... env -i K=V ... PYTHON DRIVER
        python, prefix = args[-2], args[:-2]
    else:
        site = sysconfig.get_paths()["purelib"]
        python = os.path.realpath(sys.executable)
        prefix = ["env", "-i", f"PYTHONPATH={REPO}:{site}", f"HOME={box.account.home}",
                  "PATH=/usr/bin:/bin", "LANG=C.UTF-8"]  # fmt: skip
    extra = [f"{k}={v}" for k, v in (environ or {}).items()]
    argv = [*prefix, *extra, python, "-m", "governor.cli", "run", "--json", "--policy",
            str(policy_path), "--workspace", str(box.ws), "--log", str(log), *flags,
            "go", "--", python, str(AGENT), *agent]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.stdout, done.stderr[-3000:]
    return json.loads(done.stdout), log


def audit(python_args: list[str], log: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "governor.cli", "audit", *python_args, str(log)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def records(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def answers(box: Box) -> dict[str, int]:
    """What the agent saw answered."""
    got: dict[str, int] = json.loads((box.ws / "answers.json").read_text())
    return got


def read_back_tally(log: Path) -> dict[str, int]:
    done = audit(["--json"], log)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["attempts"]
    tally: dict[str, int] = row["tally"]
    return tally


def verified(log: Path) -> None:
    done = audit(["verify"], log)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("user", USERS)
def test_a_60_kb_host_is_refused_by_its_length_and_recorded_once_and_small(
    accounts: dict[str, Account | str], user: str, upstream: int
) -> None:
    box = attempt_box(accounts, user, "huge")
    allowed = f"127.0.0.1:{upstream}"
    outcome, log = governor_run(box, "huge", "", ["hugehost", "64"], "--allow-host", allowed,
                                "--env", "ALLOWED", environ={"ALLOWED": allowed})  # fmt: skip
    assert answers(box) == {"allowed": 1, "refused": 64, "other": 0}, outcome
    network = [r for r in records(log) if r.get("kind") == "network"]
    denied = [r for r in network if r["verdict"] == "deny"]
    assert denied and all("60000 characters long; DNS allows 253" in r["reason"] for r in denied), [r["reason"] for r in denied][:3]
    assert all(len(json.dumps(r)) < 2048 for r in network), max(len(json.dumps(r)) for r in network)
    assert log.stat().st_size < 256 * 1024  # 64 records of 3 x 60 KB were 11 MB
    assert [r["verdict"] for r in network if r["verdict"] != "deny"] == ["allow"]
    assert read_back_tally(log)["refused"] == 64 == outcome["acp"]["tally"]["refused"]
    verified(log)


@pytest.mark.parametrize("user", USERS)
def test_a_flood_of_refusals_is_counted_past_a_rate_and_the_tally_counts_each(
    accounts: dict[str, Account | str], user: str
) -> None:
    box = attempt_box(accounts, user, "flood")
    outcome, log = governor_run(box, "flood", "", ["connects", "3000"])
    assert answers(box) == {"allowed": 0, "refused": 3000, "other": 0}
    written = records(log)
    full = [r for r in written if r.get("kind") == "network"]
    counts = [r for r in written if r.get("kind") == "repeated"]
    assert len(full) < 3000 and counts, len(full)
    assert len(full) + sum(r["count"] for r in counts) == 3000
    assert all(r["of"] == "network" and r["origin"] == "agent" for r in counts)
    assert all("more refusals like seq" in r["reason"] for r in counts)
    assert all(r["subject"]["host"] == "refused.example" for r in full)  # the first in full
    assert outcome["acp"]["tally"]["refused"] == 3000 == read_back_tally(log)["refused"]
    verified(log)


@pytest.mark.parametrize("user", USERS)
def test_past_its_log_limit_an_attempt_fails_naming_it_and_the_log_loses_no_answer(
    accounts: dict[str, Account | str], user: str
) -> None:
    box = attempt_box(accounts, user, "full")
    outcome, log = governor_run(box, "full", '[limits]\nlog = "1M"', ["titles", "60"])
    assert outcome["status"] == "failed"
    assert "[limits] log = 1M" in outcome["reason"], outcome["reason"]
    seen = answers(box)
    assert seen["refused"] > 0 and seen["allowed"] > 0, seen
    assert log.stat().st_size < (1 << 20) + 64 * 1024
    tally = read_back_tally(log)
    assert (tally["allowed"], tally["refused"]) == (seen["allowed"], seen["refused"]), tally
    assert (outcome["acp"]["tally"]["allowed"], outcome["acp"]["tally"]["refused"]) == (
        seen["allowed"], seen["refused"])  # fmt: skip
    kinds = [r["kind"] for r in records(log)]
    assert kinds.count("limit") == 1 and kinds[-1] == "attempt-end"
    verified(log)
    # the neighbour: the same agent under the default limit is answered in full
    box = attempt_box(accounts, user, "roomy")
    outcome, log = governor_run(box, "roomy", "", ["titles", "60"])
    assert outcome["status"] == "completed", outcome["reason"]
    assert answers(box) == {"allowed": 60, "refused": 0, "other": 0}
    verified(log)


@pytest.mark.parametrize("user", USERS)
def test_an_agent_filling_the_workspace_is_stopped_at_the_workspace_limit(
    accounts: dict[str, Account | str], user: str
) -> None:
    box = attempt_box(accounts, user, "fill")
    try:
        outcome, log = governor_run(box, "fill", '[limits]\nworkspace = "8M"', ["write", "200"])
    finally:
        box.write(box.ws / "stop")
    assert outcome["status"] == "failed"
    assert "stopped at its workspace limit 8M" in outcome["reason"], outcome["reason"]
    assert (box.ws / "big.bin").stat().st_size < 100 << 20
    assert [r["kind"] for r in records(log)].count("limit") == 1
    box = attempt_box(accounts, user, "fits")
    outcome, log = governor_run(box, "fits", '[limits]\nworkspace = "8M"', ["write", "2"])
    assert outcome["status"] == "completed", outcome["reason"]
    assert (box.ws / "big.bin").stat().st_size == 2 << 20


@pytest.mark.parametrize("user", USERS)
def test_a_fork_bomb_s_attempt_names_the_processes_limit_whatever_words_the_agent_dies_with(
    accounts: dict[str, Account | str], user: str
) -> None:
    box = attempt_box(accounts, user, "bomb")
    outcome, _ = governor_run(box, "bomb", "[limits]\nprocesses = 64", ["fork", "500"])
    assert outcome["status"] == "failed"
    assert "stopped at its processes limit 64 (a new process was refused)" in outcome["reason"]
    box = attempt_box(accounts, user, "few")
    outcome, _ = governor_run(box, "few", "[limits]\nprocesses = 64", ["fork", "8"])
    assert outcome["status"] == "completed", outcome["reason"]


def test_connections_past_the_proxy_s_bound_are_refused_and_recorded(attack: Run) -> None:
    script = RAW % (
        "import time\n"
        "held = [socket.create_connection(('127.0.0.1', 3128)) for _ in range(4)]\n"
        "time.sleep(0.3)\n"
        "over = [raw('127.0.0.1', 3128, b'GET http://127.0.0.1:%d/ HTTP/1.1\\r\\n\\r\\n' % A)[:12]"
        " for _ in range(20)]\n"
        "print('over=' + ','.join(sorted(set(over))))\n"
        "for s in held: s.close()\n"
        "time.sleep(0.3)\n"
        "print('after=' + raw('127.0.0.1', 3128, b'GET http://127.0.0.1:%d/ HTTP/1.1\\r\\n"
        "Host: 127.0.0.1:%d\\r\\n\\r\\n' % (A, A))[:15])\n"
    )
    result = attack(script, limits={"connections": 4, "head_timeout": 5.0})
    got = lines(result)
    assert got["over"] == "HTTP/1.1 503", result
    assert got["after"] == "HTTP/1.1 200 OK", result
    over = [r for r in refused(result) if "over 4 connections" in r["subject"].get("problem", "")]
    assert len(over) == 20, result["network"]
