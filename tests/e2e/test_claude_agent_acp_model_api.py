"""claude-agent-acp and its model API through the real ``governor run --agent claude``
(issue 37): the operator's base URL reaches the agent with no ``--env``, and a
model API that cannot be reached ends the attempt within seconds, ``failed``,
naming the host, its failures counted apart from the policy's refusals.

The agent is found on ``PATH`` as its preset's program (`preset_path`); its
model is the loopback stand-in, or an address that does not answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from npm_agents import CLAUDE_AGENT_ACP, Job, preset_path
from standin import StandIn, write

from governor.audit.verify import read_lines, verify

pytestmark = [pytest.mark.e2e, pytest.mark.npm_agent(CLAUDE_AGENT_ACP)]

GOVERNOR = str(Path(sys.executable).parent / "governor")


async def _governor_run(job: Job, base_url: str, *flags: str) -> tuple[int, dict[str, Any], str, float]:
    """``governor run --agent claude --json`` with the operator's
    ``ANTHROPIC_BASE_URL`` and key set in its environment and no ``--env``:
    the exit code, the outcome, stderr and the seconds it took (for the
    message only: no test asserts on time)."""
    environ = job.environ(ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY="dummy", IS_SANDBOX="1")
    environ["PATH"] = preset_path(environ, "claude-agent-acp")
    environ["XDG_STATE_HOME"] = str(job.root / "state")
    if "PYTHONPATH" in os.environ:  # a checkout run as is: the governor its code
        environ["PYTHONPATH"] = os.environ["PYTHONPATH"]
    argv = [GOVERNOR, "run", "--agent", "claude", "--capability", "edit-workspace",
            "--workspace", str(job.workspace), "--log", str(job.log), "--timeout", "120",
            "--json", *flags, "Do the task."]  # fmt: skip
    began = time.monotonic()
    done = await trio.to_thread.run_sync(
        lambda: subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=300)
    )
    took = time.monotonic() - began
    assert done.stdout.strip(), done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout), done.stderr, took


def _verified(job: Job) -> list[dict[str, Any]]:
    result = verify(read_lines(job.log))
    assert result.problem is None and result.unfinished == (), result.problem
    return [r for _, r, _ in read_lines(job.log) if r is not None]


async def test_the_operators_base_url_reaches_the_agent_without_env_and_its_stand_in_serves_the_turn(
    job: Job,
) -> None:
    made = job.workspace / "made.txt"
    with StandIn([write(str(made), "written through the gateway\n")]) as model:
        code, outcome, stderr, _ = await _governor_run(job, model.url)
    assert outcome["status"] == "completed", (outcome.get("reason"), stderr[-2000:])
    assert code == 0
    assert model.turns() >= 1 and model.tool_uses() == ["Write"], model.describe()
    assert made.read_text() == "written through the gateway\n"
    _verified(job)
