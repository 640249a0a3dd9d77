"""An unsandboxed (full-access) agent under its watchdog: everything it started dies
with the governor, SIGKILL included, and at the end of the block; its exit status,
its environment and the governor's signals reach it as if there were no watchdog.

Every agent here forks a daemon the hard way: a double fork, ``setsid()``, an empty
environment (no marker variable for the governor's sweep to find) and SIGTERM
ignored. Only the watchdog, as the subreaper it is reparented to, can find it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from sandbox_procs import processes_matching

from governor.policies.capability import Capability
from governor.sandbox.plan.profile import Profile
from governor.sandbox.run.agent import agent_process
from governor.sandbox.run.launch import prepare
from governor.sandbox.run.spawn import Child

GUARD = 30.0
"""Only a guard against a hang; never an assertion on speed."""

AGENT = """
import json, os, signal, subprocess, sys, time
mode, marker = sys.argv[1], sys.argv[2]
sleeper = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
child = subprocess.Popen([sys.executable, "-c", sleeper, marker, "child"])
middle = os.fork()
if middle == 0:
    os.setsid()
    if os.fork() == 0:
        os.execve(sys.executable, [sys.executable, "-c", sleeper, marker, "daemon"], {})
    os._exit(0)
os.waitpid(middle, 0)
if mode == "exit":
    os._exit(int(sys.argv[3]))
if mode == "signal":
    os.kill(os.getpid(), signal.SIGTERM)
if mode == "stubborn":
    def noted(signum, frame):
        print("got SIGTERM", flush=True)
    signal.signal(signal.SIGTERM, noted)
print(json.dumps(dict(os.environ)) if mode == "env" else "ready", flush=True)
while True:
    time.sleep(60)
"""

GOVERNOR = """
import sys, trio
from pathlib import Path
from governor.policies.capability import Capability
from governor.sandbox.run.agent import agent_process
from governor.sandbox.plan.profile import Profile

async def main() -> None:
    profile = Profile.for_agent(Capability.FULL_ACCESS, Path(sys.argv[1]))
    async with agent_process(profile, sys.argv[2:], stderr=None) as agent:
        line = b""
        while not line.endswith(b"\\n"):
            line += await agent.stdout.receive_some(100)
        print("agent", line.decode().strip(), flush=True)
        await trio.sleep_forever()

trio.run(main)
"""


@pytest.fixture
def marker() -> Iterator[str]:
    """A fresh marker for the agent's argv; whatever still carries it is killed after."""
    value = f"watchdogtest-{uuid.uuid4().hex}"
    yield value
    for pid in processes_matching(value):
        os.kill(pid, signal.SIGKILL)


def full_access(ws: Path, **env: str) -> Profile:
    return Profile.for_agent(Capability.FULL_ACCESS, ws, env=env)


def agent_argv(mode: str, marker: str, *extra: str) -> list[str]:
    return [sys.executable, "-c", AGENT, mode, marker, *extra]


async def read_line(agent: Child) -> str:
    stream = agent.stdout
    assert stream is not None
    line = b""
    with trio.fail_after(GUARD):
        while not line.endswith(b"\n"):
            chunk = await stream.receive_some(4096)
            assert chunk, f"the agent's stdout ended after {line!r}"
            line += chunk
    return line.decode().strip()


async def gone(marker: str) -> list[int]:
    """The marked processes still alive after waiting (a SIGKILL takes a moment)."""
    with trio.move_on_after(GUARD):
        while processes_matching(marker):
            await trio.sleep(0.05)
    return processes_matching(marker)


async def test_a_sigkilled_governor_takes_the_agent_its_child_and_its_setsid_daemon_down(
    ws: Path, marker: str
) -> None:
    governor = subprocess.Popen(
        [sys.executable, "-c", GOVERNOR, str(ws), *agent_argv("hang", marker)],
        stdout=subprocess.PIPE,
    )
    try:
        assert governor.stdout is not None
        ready = await trio.to_thread.run_sync(governor.stdout.readline)
        assert ready == b"agent ready\n"
        started = set(processes_matching(marker)) - {governor.pid}
        assert len(started) == 4  # the watchdog, the agent, its child, its daemon
        governor.kill()
        await trio.to_thread.run_sync(governor.wait)
    finally:
        governor.kill()
    assert await gone(marker) == []


@pytest.mark.parametrize(
    ("mode", "returncode"),
    [(["exit", "3"], 3), (["signal"], -signal.SIGTERM)],
    ids=["exit-3", "killed-by-sigterm"],
)
async def test_the_agents_own_exit_is_reported_once_nothing_it_started_is_left(
    ws: Path, marker: str, mode: list[str], returncode: int
) -> None:
    async with agent_process(full_access(ws), agent_argv(mode[0], marker, *mode[1:])) as agent:
        with trio.fail_after(GUARD):
            assert await agent.wait() == returncode
        assert processes_matching(marker) == []  # at once: the watchdog swept before it exited


async def test_sigterm_reaches_an_agent_that_ignores_it_and_the_end_of_the_block_kills_its_tree(
    ws: Path, marker: str
) -> None:
    async with agent_process(full_access(ws), agent_argv("stubborn", marker)) as agent:
        assert await read_line(agent) == "ready"
        assert agent.stdin is not None
        await agent.stdin.aclose()
        os.killpg(agent.pid, signal.SIGTERM)  # what the attempt's shutdown sends
        assert await read_line(agent) == "got SIGTERM"
        assert agent.returncode is None
    assert agent.returncode == -signal.SIGKILL
    assert processes_matching(marker) == []


async def test_the_agent_gets_exactly_the_environment_the_profile_declares(
    ws: Path, marker: str
) -> None:
    profile = full_access(ws, DECLARED="yes", PATH="/usr/bin:/bin")
    argv = agent_argv("env", marker)
    with prepare(profile, argv, None) as launch:
        expected = launch.env
    assert "LC_CTYPE" not in expected
    async with agent_process(profile, argv) as agent:
        seen = json.loads(await read_line(agent))
    assert seen == expected  # no LC_CTYPE from the watchdog's own Python, nothing else


async def test_an_agent_program_that_does_not_exist_raises_as_a_direct_spawn_would(
    ws: Path, marker: str
) -> None:
    with pytest.raises(FileNotFoundError):
        async with agent_process(full_access(ws, PATH=str(ws)), [f"no-agent-{marker}"]):
            pass
    assert processes_matching(marker) == []  # and its watchdog is gone
