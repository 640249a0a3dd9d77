"""Qwen Code 0.24.4 on Node 22, driven by the loopback Chat Completions stand-in.

Its ACP session starts in mode ``auto`` (writes unasked, a model call decides
about shell commands): the governor puts it in ``default``, where it asks for
writes, edits and shell, writes through the client's ``fs/write_text_file`` and
runs shell commands itself. It runs in the agent's sandbox, with its test
``$HOME`` (not the password database's) kept as an empty home of its own: Qwen
Code does not start where its ``$HOME`` does not exist.
"""

from __future__ import annotations

import pytest
from npm_agents import (
    MODULES,
    NODE_22,
    QWEN_CODE,
    Job,
    preset_path,
    qwen_argv,
    records,
    tally_without_network,
)
from openai_standin import Call, OpenAIStandIn

from governor.attempt.lifecycle import run_attempt

pytestmark = [pytest.mark.e2e, pytest.mark.npm_agent(QWEN_CODE, node=str(MODULES / NODE_22))]


def steps(job: Job) -> list[Call]:
    return [
        Call(
            ("write_file",), {"file_path": str(job.workspace / "hello.txt"), "content": "hello\n"}
        ),
        Call(
            ("run_shell_command",),
            {"command": f"echo ran > {job.workspace}/ran.txt", "description": "run it"},
        ),
    ]


async def test_qwen_code_is_put_in_its_asking_mode_and_every_action_is_asked(job: Job) -> None:
    with OpenAIStandIn(steps(job)) as model:
        outcome = await run_attempt(job.spec(qwen_argv(), **job.qwen(model.url)))
    assert outcome.status == "completed", f"{outcome.reason}\n{model.describe()}"
    assert model.tool_calls() == ["write_file", "run_shell_command"], model.describe()
    assert (job.workspace / "hello.txt").read_text() == "hello\n"
    assert (job.workspace / "ran.txt").read_text() == "ran\n"
    (switch,) = records(outcome, "config")
    assert switch["subject"] == {"option": "mode", "value": "default"}
    assert "auto would act without asking" in switch["reason"]
    assert outcome.acp is not None
    assert outcome.acp.mode == {"id": "default", "name": "Default", "asks": True}
    assert outcome.acp.config.get("mode") == "default"
    # The write came through the client's fs, the command it ran itself, under its permission.
    (write,) = records(outcome, "write")
    assert write["subject"]["path"] == str(job.workspace / "hello.txt")
    (ran,) = records(outcome, "changed")
    assert ran["subject"]["path"] == str(job.workspace / "ran.txt")
    t = outcome.acp.tally
    # its model requests went through the proxy; its telemetry (aliyun RUM) was refused
    stand_in = model.url.split("//")[1].split("/")[0]
    asked, allowed, refused, unasked = tally_without_network(outcome, stand_in)
    assert (refused, unasked) == (0, 0) and asked == allowed >= 3, t
    assert not outcome.acp.decides_alone and outcome.acp.sandboxed_agent
    job.verified_log()


async def test_the_qwen_preset_runs_it_on_the_path_with_the_model_asked_for(job: Job) -> None:
    with OpenAIStandIn(steps(job)[:1]) as model:
        kw = job.qwen(model.url)
        # `qwen` (npm's link to cli-entry.js) and the Node 22 its shebang finds.
        kw["environ"]["PATH"] = preset_path(kw["environ"], "qwen", "node")
        spec = job.spec(None, agent="qwen", model="qwen3-coder-next", **kw)
        outcome = await run_attempt(spec)
    assert outcome.status == "completed", f"{outcome.reason}\n{model.describe()}"
    assert outcome.acp is not None and outcome.acp.preset == "qwen"
    assert outcome.acp.mode is not None and outcome.acp.mode["id"] == "default"
    assert set(model.models()) == {"qwen3-coder-next"}, model.describe()
    # As Qwen Code names it in its model option: `$runtime|openai|qwen3-coder-next`.
    assert outcome.acp.model is not None and "qwen3-coder-next" in outcome.acp.model
