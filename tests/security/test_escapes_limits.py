"""Resource bombs: each runs for real inside the sandbox, as root and as an
unprivileged user, in a bwrap of its own and in a session's sandbox (the
``box`` fixture), and must end at its limit, named, while the allowed
neighbour in the same setup works. Then whole attempts (``governor run``, as
each user): an agent over its CPU is ended, and a fork bomb's attempt leaves a
second attempt on the machine free to complete.

What the host keeps is checked on the host: no process of a bomb is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import sysconfig
import time

import pytest
from escape_harness import REPO, USERS, Account, Box, processes_matching

AGENT = REPO / "tests" / "sandbox" / "limits_agent.py"
MEMORY = {"memory": 512 << 20}
PROCESSES = {"processes": 64}
TMP = {"tmp": 8 << 20}
CPU = {"cpu_seconds": 1}


def marker() -> str:
    return "govlimit-" + secrets.token_hex(4)


def gone(needle: str, seconds: float = 5.0) -> list[int]:
    """Wait until no host process matches (a namespace is torn down
    asynchronously); kill and return whatever is still alive then."""
    deadline = time.monotonic() + seconds
    alive = processes_matching(needle)
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = processes_matching(needle)
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return alive


def test_a_3_gib_allocation_ends_at_the_memory_limit_and_100_mib_works(box: Box) -> None:
    big = box.run("python3 -c 'b = bytearray(3 << 30); print(len(b))'", limits=MEMORY)
    assert big.error is None, big.error
    assert big.exit_code != 0
    assert big.limit == "memory limit 512M (an allocation over it was refused)", big.text
    assert "[governor: stopped at the memory limit 512M" in big.text  # what the agent reads
    small = box.run("python3 -c 'b = bytearray(100 << 20); print(len(b))'", limits=MEMORY)
    assert (small.exit_code, small.limit) == (0, None), small.text
    assert str(100 << 20) in small.text


def test_a_fork_loop_stops_at_the_processes_limit_and_a_few_processes_work(box: Box) -> None:
    tag = marker()
    loop = (
        "import os, sys, time\n"
        "n = 0\n"
        "while True:\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError as exc:\n"
        "        print('forked', n, '; fork failed:', exc); sys.exit(1)\n"
        "    if pid == 0:\n"
        "        time.sleep(60); os._exit(0)\n"
        "    n += 1\n"
    )
    bomb = box.run(["python3", "-c", loop, tag], limits=PROCESSES, timeout=60)
    assert bomb.error is None, bomb.error
    assert bomb.exit_code == 1 and not bomb.timed_out, bomb.text
    assert bomb.limit is not None and bomb.limit.startswith("processes limit 64"), bomb.text
    forked = int(bomb.text.split("forked", 1)[1].split()[0])
    assert 0 < forked < 64
    assert gone(tag) == []  # nothing of the bomb is left on the host
    few = box.run(
        "for i in 1 2 3 4 5 6 7 8; do sleep 0.1 & done; wait; echo all-done", limits=PROCESSES
    )
    assert (few.exit_code, few.limit) == (0, None), few.text
    assert "all-done" in few.text


def test_dd_into_tmp_stops_at_the_tmp_limit_and_a_small_file_works(box: Box) -> None:
    full = box.run("dd if=/dev/zero of=/tmp/big bs=1M count=64", limits=TMP)
    assert full.error is None, full.error
    assert full.exit_code != 0
    assert full.limit == "tmp limit 8M (the private /tmp is full)", full.text
    small = box.run("dd if=/dev/zero of=/tmp/small bs=1M count=2 && ls -l /tmp/small", limits=TMP)
    assert (small.exit_code, small.limit) == (0, None), small.text


def test_a_command_over_cpu_seconds_is_killed_at_the_limit_and_a_short_one_works(
    box: Box,
) -> None:
    spin = box.run("python3 -c 'while True: pass'", limits=CPU, timeout=60)
    assert spin.error is None, spin.error
    assert not spin.timed_out
    assert spin.exit_code == 128 + signal.SIGXCPU
    assert spin.limit == "cpu limit 1 s (killed by SIGXCPU)"
    short = box.run("python3 -c 'print(sum(range(10**5)))'", limits=CPU)
    assert (short.exit_code, short.limit) == (0, None), short.text


# -- whole attempts, as each user ---------------------------------------------------------


def _attempt_box(accounts: dict[str, Account | str], user: str, name: str) -> Box:
    account = accounts[user]
    if isinstance(account, str):
        pytest.skip(f"{user}: {account}")
    assert account.base is not None
    return Box(user, account, account.base / f"{name}-{secrets.token_hex(3)}")


def _python(box: Box) -> tuple[str, list[str]]:
    """The Python that runs the governor as the box's user (the escape suite's
    driver found one that user can run), and the words that run it as them."""
    driver = box.account.driver
    if driver is not None:
        args = [str(a) for a in driver.proc.args]  # runuser ... env -i K=V ... PYTHON DRIVER
        return args[-2], args[:-2]
    site = sysconfig.get_paths()["purelib"]
    env = [f"PYTHONPATH={REPO}:{site}", f"HOME={box.account.home}", "PATH=/usr/bin:/bin"]
    return os.path.realpath(sys.executable), ["env", "-i", *env, "LANG=C.UTF-8"]


def _governor(box: Box, name: str, limits: str, *words: str) -> list[str]:
    """``governor run --json`` as the box's user, under a policy with ``limits``;
    ``{python}`` in ``words`` is that user's Python."""
    policy = box.write(
        box.dir / f"{name}.toml", f'capability = "edit-workspace"\n[limits]\n{limits}\n'
    )
    python, prefix = _python(box)
    return [
        *prefix, python, "-m", "governor.cli", "run", "--json", "--policy", str(policy),
        "--workspace", str(box.ws), "--log", str(box.dir / f"{name}.jsonl"),
        *(python if word == "{python}" else word for word in words),
    ]  # fmt: skip


@pytest.mark.parametrize("user", USERS)
def test_an_agent_over_cpu_seconds_is_ended_and_its_attempt_fails_naming_the_limit(
    accounts: dict[str, Account | str], user: str
) -> None:
    box = _attempt_box(accounts, user, "spin")
    argv = _governor(box, "spin", "cpu_seconds = 2", "go", "--", "{python}", str(AGENT), "spin")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "failed"
    assert "stopped at its cpu limit 2 s (killed by SIGXCPU)" in outcome["reason"]


@pytest.mark.parametrize("user", USERS)
def test_while_a_fork_bomb_s_attempt_runs_a_second_attempt_completes(
    accounts: dict[str, Account | str], user: str
) -> None:
    bomb_box = _attempt_box(accounts, user, "bomb")
    demo_box = _attempt_box(accounts, user, "demo")
    bomb_argv = _governor(
        bomb_box, "bomb", "processes = 64", "go", "--", "{python}", str(AGENT), "fork"
    )
    bomb = subprocess.Popen(bomb_argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        at_limit = bomb_box.ws / "at-limit"
        deadline = time.monotonic() + 120  # a guard only: nothing is asserted on time
        while not at_limit.exists() and bomb.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert at_limit.exists(), "the bomb never reached its limit"
        demo_argv = _governor(
            demo_box, "demo", "processes = 64", "--agent", "demo", "Write a hello program"
        )
        demo = subprocess.run(demo_argv, capture_output=True, text=True, timeout=300)
        assert bomb.poll() is None, "the bomb ended before the second attempt did"
    finally:
        bomb_box.write(bomb_box.ws / "stop")
        out, err = bomb.communicate(timeout=120)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert json.loads(demo.stdout)["status"] == "completed"
    assert (demo_box.ws / "hello.py").exists()
    assert bomb.returncode == 1, err
    reason = json.loads(out)["reason"]
    assert "stopped at its processes limit 64 (a new process was refused)" in reason
    assert int(at_limit.read_text()) < 64


def test_a_sandboxed_process_cannot_raise_its_limits_or_leave_its_pids_group(box: Box) -> None:
    limits = {**MEMORY, **PROCESSES, **CPU}
    escape = box.run(
        "python3 -c 'import resource as r; r.setrlimit(r.RLIMIT_NPROC, (10**6, 10**6))' "
        "&& echo RAISED-NPROC; "
        "python3 -c 'import resource as r; r.setrlimit(r.RLIMIT_DATA, (-1, -1))' "
        "&& echo RAISED-DATA; "
        "for g in /sys/fs/cgroup/pids /sys/fs/cgroup/unified /sys/fs/cgroup; do "
        '  (echo $$ > "$g/cgroup.procs") 2>/dev/null && echo "LEFT-GROUP $g"; '
        "done; "
        "python3 -c 'import resource as r; print(r.getrlimit(r.RLIMIT_NPROC))'; echo checked",
        limits=limits,
    )
    assert escape.error is None, escape.error
    assert "checked" in escape.text
    assert "RAISED" not in escape.text and "LEFT-GROUP" not in escape.text, escape.text
    assert escape.text.split("checked")[0].strip().splitlines()[-1] == "(64, 64)"
