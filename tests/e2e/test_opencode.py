"""OpenCode 1.18.33 (its native binary), driven by the loopback Chat Completions stand-in.

``opencode acp`` serves its own HTTP server on ``127.0.0.1:4096`` and talks to
it: inside the agent's sandbox that loopback is the sandbox's own, which
``NO_PROXY`` names, so those requests never meet the proxy (sent there, they
were refused as the host's loopback and ``session/new`` failed). The model is a
custom provider (``@ai-sdk/openai-compatible``, bundled in the binary) in
``OPENCODE_CONFIG_CONTENT``; the models.dev fetch, updates, sharing and LSP
downloads are switched off. What it still tries (the npm registry) is refused
and recorded.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from npm_agents import Job, installed, preset_path, records, tally_without_network
from openai_standin import Call, OpenAIStandIn

from governor.attempt.lifecycle import run_attempt

OPENCODE = "opencode-ai/bin/opencode.exe"
"""npm's postinstall links the platform package's binary here."""

pytestmark = [pytest.mark.e2e, pytest.mark.npm_agent(OPENCODE, node=None)]


def opencode(job: Job, url: str) -> dict[str, Any]:
    """`Job.spec` keywords for OpenCode with the stand-in at ``url`` as its only model."""
    config = {
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            "standin": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "stand-in",
                "options": {"baseURL": url, "apiKey": "dummy"},
                "models": {"m1": {"name": "m1", "tool_call": True}},
            }
        },
        "model": "standin/m1",
    }
    variables = {
        "OPENAI_BASE_URL": url,  # the preset's base-URL variable: the agent may reach it
        "OPENCODE_CONFIG_CONTENT": json.dumps(config),
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    }
    return {"environ": job.environ(**variables), "env": tuple(variables), "timeout": 120}


def steps(job: Job) -> list[Call]:
    return [Call(("write",), {"filePath": str(job.workspace / "hello.txt"), "content": "hello\n"})]


def network_to_itself(outcome: Any) -> list[dict[str, Any]]:
    return [r for r in records(outcome, "network") if r["subject"]["port"] == 4096]


async def test_opencode_sandboxed_reaches_its_own_server_past_the_proxy_and_its_model_through_it(
    job: Job,
) -> None:
    with OpenAIStandIn(steps(job)) as model:
        argv = [*installed(OPENCODE, node=None), "acp", "--pure"]
        outcome = await run_attempt(job.spec(argv, **opencode(job, model.url)))
    assert outcome.status == "completed", f"{outcome.reason}\n{model.describe()}"
    assert model.tool_calls() == ["write"], model.describe()
    assert (job.workspace / "hello.txt").read_text() == "hello\n"
    assert outcome.acp is not None and outcome.acp.sandboxed_agent
    # its own server stayed inside; every allowed connection went to the stand-in
    assert network_to_itself(outcome) == []
    stand_in = model.url.split("//")[1].split("/")[0]
    tally_without_network(outcome, stand_in)
    allowed = [r for r in records(outcome, "network") if r["verdict"] == "allow"]
    assert allowed and {r["subject"]["via"] for r in allowed} == {"forward"}
    # it writes with its own tool, without asking: the governor records that it did
    (wrote,) = [r for r in records(outcome, "unasked") + records(outcome, "changed")
                if str(job.workspace / "hello.txt") in json.dumps(r["subject"])]  # fmt: skip
    assert wrote["kind"] in ("unasked", "changed")
    job.verified_log()


async def test_the_opencode_preset_runs_it_on_the_path_in_its_sandbox(job: Job) -> None:
    with OpenAIStandIn(steps(job)) as model:
        kw = opencode(job, model.url)
        # `opencode` (npm's link to the binary), as the preset's argv names it
        kw["environ"]["PATH"] = preset_path(kw["environ"], "opencode")
        outcome = await run_attempt(job.spec(None, agent="opencode", **kw))
    assert outcome.status == "completed", f"{outcome.reason}\n{model.describe()}"
    assert outcome.acp is not None and outcome.acp.preset == "opencode"
    assert (job.workspace / "hello.txt").read_text() == "hello\n"
    assert network_to_itself(outcome) == []


XDG = ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")


async def test_with_the_xdg_variables_set_opencode_keeps_its_folders_where_they_point(
    job: Job,
) -> None:
    """A machine that sets the XDG variables (outside $HOME here): the preset's
    home folders are where they point, writable in its sandbox, and what in
    them runs code later stays read-only there (its plugin folder)."""
    places = {name: job.home.parent / "xdg" / name.lower() for name in XDG}
    plugin = places["XDG_CONFIG_HOME"] / "opencode" / "plugin" / "planted.js"
    probe = f"echo 'export default 1' > {plugin}; echo wrote=$?"
    with OpenAIStandIn([*steps(job), Call(("bash",), {"command": probe, "description": "probe"})]) as model:
        kw = opencode(job, model.url)
        kw["environ"].update({name: str(place) for name, place in places.items()})
        kw["environ"]["PATH"] = preset_path(kw["environ"], "opencode")
        outcome = await run_attempt(job.spec(None, agent="opencode", **kw))
    assert outcome.status == "completed", f"{outcome.reason}\n{model.describe()}"
    assert model.tool_calls() == ["write", "bash"], model.describe()
    assert (job.workspace / "hello.txt").read_text() == "hello\n"
    kept = [p for p in (places["XDG_DATA_HOME"] / "opencode").rglob("*") if p.is_file()]
    assert kept, "nothing of OpenCode's data was kept where XDG_DATA_HOME points"
    assert not plugin.exists(), "its plugin folder took a file from its sandbox"
    assert not (job.home / ".local" / "share" / "opencode").exists()
