"""GitHub Copilot CLI 1.0.102 (its native binary), bring-your-own-key, driven by the
loopback Chat Completions stand-in.

It asks permission, then writes files and runs bash **itself** (no ``fs/*``, no
``terminal/*``); its ``session/new`` offers modes whose ids are URLs and a
config option ``allow_all`` that, on, makes it stop asking.
"""

from __future__ import annotations

import pytest
from npm_agents import COPILOT, Job, copilot_argv, records, tally_without_network
from openai_standin import Call, OpenAIStandIn

from governor.attempt.lifecycle import run_attempt

pytestmark = [pytest.mark.e2e, pytest.mark.npm_agent(COPILOT, node=None)]

AGENT_MODE = "https://agentclientprotocol.com/protocol/session-modes#agent"


def steps(job: Job) -> list[Call]:
    return [
        Call(("create",), {"path": str(job.workspace / "hello.txt"), "file_text": "hello\n"}),
        Call(
            ("bash",), {"command": f"echo ran > {job.workspace}/ran.txt", "description": "run it"}
        ),
    ]


async def test_copilot_in_its_sandbox_asks_and_what_it_does_is_explained(job: Job) -> None:
    with OpenAIStandIn(steps(job)) as model:
        outcome = await run_attempt(job.spec(copilot_argv(), **job.copilot(model.url)))
    assert outcome.status == "completed", f"{outcome.reason}\n{model.describe()}"
    assert model.tool_calls() == ["create", "bash"], model.describe()
    assert (job.workspace / "hello.txt").read_text() == "hello\n"
    assert (job.workspace / "ran.txt").read_text() == "ran\n"
    assert {r["verdict"] for r in records(outcome, "permission")} == {"allow"}
    assert records(outcome, "write") == [] and records(outcome, "terminal") == []
    assert outcome.acp is not None
    t = outcome.acp.tally
    # its model requests went through the proxy, each an allowed network record
    assert records(outcome, "network"), t
    stand_in = model.url.split("//")[1].split("/")[0]
    assert tally_without_network(outcome, stand_in) == (2, 2, 0, 0), t
    assert {r["subject"]["path"] for r in records(outcome, "changed")} == {
        str(job.workspace / "hello.txt"),
        str(job.workspace / "ran.txt"),
    }
    assert outcome.acp.sandboxed_agent
    # allow_all stays off, and the mode it starts in asks: nothing was switched on.
    assert outcome.acp.config.get("allow_all") == "off", outcome.acp.config
    assert outcome.acp.mode is not None and outcome.acp.mode["id"] == AGENT_MODE
    assert not any(r["subject"].get("value") == "on" for r in records(outcome, "config"))
    job.verified_log()


async def test_the_copilot_preset_runs_it_and_knows_its_asking_mode(
    job: Job, tmp_path_factory: pytest.TempPathFactory
) -> None:
    binary = copilot_argv()[0]
    bin_dir = tmp_path_factory.mktemp("bin")
    (bin_dir / "copilot").symlink_to(binary)
    with OpenAIStandIn(steps(job)[:1]) as model:
        kw = job.copilot(model.url)
        kw["environ"]["PATH"] = f"{bin_dir}:{kw['environ']['PATH']}"
        # The link lies under /tmp, which the agent's sandbox hides: it is recreated inside.
        spec = job.spec(None, agent="copilot", model="gpt-4.1", **kw)
        outcome = await run_attempt(spec)
    assert outcome.status == "completed", f"{outcome.reason}\n{model.describe()}"
    assert outcome.acp is not None and outcome.acp.preset == "copilot"
    assert outcome.acp.mode == {"id": AGENT_MODE, "name": "Agent", "asks": True}
    assert outcome.acp.known and not outcome.acp.decides_alone and outcome.acp.sandboxed_agent
    assert set(model.models()) == {"gpt-4.1"}, model.describe()
    (start,) = [r for r in job.verified_log() if r["kind"] == "attempt-start"]
    assert start["argv"] == [str(bin_dir / "copilot"), "--acp", "--no-auto-update"]
