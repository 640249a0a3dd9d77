"""The attempt budget's count (`governor.sandbox.host.budget`) over real processes: the
threads and written memory of every process below a registered one are
counted, a reaped one no longer is, and one registered after the budget was
spent is killed at once."""

from __future__ import annotations

import subprocess
import sys

from governor.sandbox.host.budget import AttemptBudget

HOLDER = """
import subprocess, sys, threading, time
kids = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
for _ in range(3):
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
held = b"x" * (40 << 20)
print("ready", flush=True)
sys.stdin.read()
for k in kids:
    k.kill()
"""


class Started:
    """A process started here, as the budget sees a sandbox: its pid, its exit
    once reaped, and a kill."""

    def __init__(self, argv: list[str]) -> None:
        self.popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def kill(self, *, hard: bool = False) -> None:
        self.popen.kill()


def holder() -> Started:
    started = Started([sys.executable, "-c", HOLDER])
    assert started.popen.stdout is not None
    assert started.popen.stdout.readline() == b"ready\n"
    return started


def test_every_thread_and_the_written_memory_of_a_sandboxs_tree_are_counted_until_it_is_reaped() -> None:
    budget = AttemptBudget(processes=100, memory=1 << 30)
    one, two = holder(), holder()
    budget.add(one)
    budget.add(two)
    try:
        usage = budget.measure()
        # each: the interpreter's 4 threads and its 2 children
        assert usage.sandboxes == 2 and usage.processes >= 12, usage
        assert usage.memory >= 80 << 20, usage
        assert budget.over(usage) is None
        tight = AttemptBudget(processes=11, memory=60 << 20)
        assert (tight.over(usage) or "").startswith("processes limit 11 across its sandboxes")
        tight.processes = None
        assert (tight.over(usage) or "").startswith("memory limit 60M across its sandboxes")
    finally:
        for started in (one, two):
            started.popen.communicate(b"")
    assert budget.measure().sandboxes == 0  # reaped: its pid may be anyone's now


def test_a_sandbox_started_after_the_budget_was_spent_is_killed_at_once() -> None:
    budget = AttemptBudget(processes=1, memory=None)
    first = holder()
    budget.add(first)
    budget.kill_all()
    assert first.popen.wait(10) < 0
    late = Started(["sleep", "60"])
    budget.add(late)
    assert late.popen.wait(10) < 0
    budget.settle()  # the checks' turn: let run again
    after = Started([sys.executable, "-c", "print('ran')"])
    budget.add(after)
    out, _ = after.popen.communicate(timeout=10)
    assert out == b"ran\n"
