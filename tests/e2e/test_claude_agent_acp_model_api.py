"""claude-agent-acp and its model API through the real ``governor run --agent claude``
(issue 37): the operator's base URL reaches the agent with no ``--env``, and a
model API that cannot be reached ends the attempt within seconds, ``failed``,
naming the host, its failures counted apart from the policy's refusals.

The agent is found on ``PATH`` as its preset's program (`preset_path`); its
model is the loopback stand-in, or an address that does not answer."""

from __future__ import annotations

import json
import os
import socket
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


def _closed_port() -> int:
    """A loopback port nothing listens on: a connection to it is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("base_url", "what"),
    [
        # `.invalid` never resolves (RFC 6761): the proxy's lookup fails
        ("https://model-api.invalid", "the host does not resolve"),
        # a gateway that is not running: the connection is refused
        ("http://127.0.0.1:{port}", "the host refused the connection"),
    ],
    ids=["dns", "refused"],
)
async def test_a_model_api_it_cannot_reach_ends_the_attempt_within_seconds_failed_not_refused(
    job: Job, base_url: str, what: str
) -> None:
    base_url = base_url.format(port=_closed_port())
    host = base_url.split("://")[1]
    host = host if ":" in host else f"{host}:443"
    code, outcome, stderr, took = await _governor_run(job, base_url, "--fail-on", "refused")
    # It ends at the first failure, long before the 120 s wall limit (Claude
    # Code retried for minutes), and names the host and what happened.
    assert outcome["status"] == "failed", (outcome.get("reason"), took)
    reason = outcome.get("reason") or ""
    assert f"the model API {host} cannot be reached: {what}" in reason, (reason, took)
    assert "timed out" not in reason and "wall limit" not in reason, (reason, took)
    # Failed, not "completed but refused": no exit 6, whatever --fail-on says.
    assert code == 1, (code, stderr[-2000:])
    assert "--fail-on" not in stderr
    # Its failures are counted apart from its refusals: what is refused is what
    # a rule refused (Claude Code also fetches raw.githubusercontent.com, which
    # no rule allows), never the API that did not answer.
    tally = outcome["acp"]["tally"]
    records = _verified(job)
    network = [r for r in records if r.get("kind") == "network" and r.get("verdict") == "deny"]
    failed = [r for r in network if r.get("failed")]
    refused = [r for r in network if not r.get("failed")]
    assert tally["failed"] == len(failed) >= 1 and tally["refused"] == len(refused), tally
    assert all(r["by"] != "protocol" for r in refused), refused
    (to_api,) = [r for r in failed if f"{r['subject']['host']}:{r['subject']['port']}" == host]
    assert to_api["subject"]["origin"] == "agent"
    assert to_api["failed"] == ("dns" if "resolve" in what else "refused")
