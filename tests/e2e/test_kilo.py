"""Kilo 7.7.7 (``kilo acp``, npm ``@kilocode/cli``: a node launcher for its
native binary), installed by ``governor agents install kilo``, driven through
the real ``governor run --agent kilo`` against the loopback Chat Completions
stand-in, configured as OpenCode is (Kilo is a fork of it): a custom provider
in ``KILO_CONFIG_CONTENT``, and its ``permission`` set to ask for edits and
shell (else its mode ``code`` acts without asking: every write and command
then shows as unasked).

It asks, writes through the client's ``fs/write_text_file`` and runs shell
commands itself, in its own sandbox, which the second test probes. The governor runs from the install's
``.bin`` on PATH, not with ``XDG_DATA_HOME`` naming the install folder: the
agent would inherit it and make its data folder there, outside its sandbox's
writable places (it does not start: "EROFS ... mkdir '$XDG_DATA_HOME/kilo'").
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from governor_agents import governor_installed, governor_run, probe_in_its_sandbox
from npm_agents import Job
from openai_standin import Call, OpenAIStandIn

pytestmark = [pytest.mark.e2e]


def kilo_environ(job: Job, url: str, bin_dir: str) -> dict[str, str]:
    config: dict[str, Any] = {
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
        "permission": {"edit": "ask", "bash": "ask"},
    }
    environ = job.environ(
        OPENAI_BASE_URL=url,  # the preset's base-URL variable: the agent may reach it
        KILO_CONFIG_CONTENT=json.dumps(config),
        KILO_DISABLE_MODELS_FETCH="1",
        KILO_DISABLE_AUTOUPDATE="1",
        KILO_DISABLE_SHARE="1",
        KILO_DISABLE_LSP_DOWNLOAD="1",
        KILO_DISABLE_DEFAULT_PLUGINS="1",
    )
    environ["PATH"] = f"{bin_dir}:{environ['PATH']}"
    return environ


def test_kilo_installed_by_the_governor_asks_for_its_write_and_command_and_both_are_governed(
    job: Job,
) -> None:
    kilo = governor_installed("kilo")
    steps = [
        Call(("write",), {"filePath": str(job.workspace / "hello.txt"), "content": "hello\n"}),
        Call(("bash",), {"command": f"echo ran > {job.workspace}/ran.txt", "description": "run it"}),
    ]
    with OpenAIStandIn(steps) as model:
        environ = kilo_environ(job, model.url, str(kilo.folder / "node_modules" / ".bin"))
        names = [w for n in environ if n.startswith(("KILO_", "OPENAI_")) for w in ("--env", n)]
        outcome = governor_run("kilo", job.workspace, job.log, environ, *names, data_home=False)
    assert outcome["status"] == "completed", f"{outcome['reason']}\n{model.describe()}"
    assert model.tool_calls() == ["write", "bash"], model.describe()
    assert (job.workspace / "hello.txt").read_text() == "hello\n"
    assert (job.workspace / "ran.txt").read_text() == "ran\n"
    acp = outcome["acp"]
    assert acp["preset"] == "kilo" and acp["sandboxed_agent"]
    records = job.verified_log()
    kinds = [(r["kind"], r.get("verdict")) for r in records]
    # asked, then written by the governor; asked, then run by Kilo itself
    assert [k for k in kinds if k[0] in ("permission", "write")][:2] == [
        ("permission", "allow"), ("write", "allow")
    ]  # fmt: skip
    ran = [r for r in records if r["kind"] == "changed"]
    assert {r["subject"]["path"] for r in ran} >= {str(job.workspace / "ran.txt")}
    assert ("unasked", "unasked") not in kinds and acp["tally"]["unasked"] == 0
    allowed = [r for r in records if r["kind"] == "network" and r["verdict"] == "allow"]
    stand_in = model.url.split("//")[1].split("/")[0]
    assert allowed and {f"{r['subject']['host']}:{r['subject']['port']}" for r in allowed} == {
        stand_in
    }


async def test_kilo_s_sandbox_refuses_a_write_outside_and_holds_its_config_read_only(
    job: Job,
) -> None:
    """Kilo runs its shell commands itself: its sandbox is what holds them.
    Probed with the system's python3 under the profile the governor gives Kilo."""
    kilo = governor_installed("kilo")
    outside = job.root / "outside"
    outside.mkdir()
    config = job.home / ".config" / "kilo"
    targets = {
        "outside": str(outside / "escape.txt"),
        "workspace": str(job.workspace / "in.txt"),
        "config": str(config / "kilo.json"),
        "opencode-config": str(config / "opencode.json"),
        "plugins": str(config / "plugins") + "/",
        "install": str(kilo.folder / "node_modules" / "@kilocode" / "cli" / "package.json"),
        "data": str(job.home / ".local" / "share" / "kilo" / "mine.txt"),
    }
    program = [str(kilo.folder / "node_modules" / ".bin" / "kilo"), "acp"]
    said = await probe_in_its_sandbox(kilo, None, job.workspace, job.home, targets, program)
    # the allowed neighbours: its workspace, and its own data folder
    assert said["workspace"] == said["data"] == "written", said
    for name in ("outside", "config", "opencode-config", "plugins", "install"):
        assert said[name] != "written", (name, said)
    assert said["install"] == "Read-only file system", said
    # a missing config file is held by a placeholder the agent may not open for writing
    assert said["config"] in ("Read-only file system", "Operation not permitted"), said
    assert not (outside / "escape.txt").exists()
    assert not (config / "kilo.json").exists()  # its placeholder went with the sandbox
    assert not any((config / "plugins").iterdir())
