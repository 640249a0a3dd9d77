"""Mistral Vibe 2.25.5 (``vibe-acp``, PyPI ``mistral-vibe``), installed by
``governor agents install vibe`` in a venv of its own, driven through the real
``governor run --agent vibe`` against the loopback Chat Completions stand-in.

Its model API is a provider in ``~/.vibe/config.toml`` (``api_base``): the test
home's names the stand-in, and the job allows its host (``--allow-host``), since
no variable of Vibe's holds a base URL. It starts in mode ``ask``: it asks
before every write and command, writes through the client's
``fs/write_text_file`` and runs commands in the client's terminals.
"""

from __future__ import annotations

import pytest
from governor_agents import governor_installed, governor_run, probe_in_its_sandbox
from npm_agents import Job
from openai_standin import Call, OpenAIStandIn

pytestmark = [pytest.mark.e2e]


def vibe_home(job: Job, url: str) -> dict[str, str]:
    """The test home's ``~/.vibe/config.toml``: the stand-in as its only
    provider, telemetry and update checks off; the environment to run it with."""
    (job.home / ".vibe").mkdir()
    (job.home / ".vibe" / "config.toml").write_text(
        'active_model = "standin"\nenable_telemetry = false\nenable_update_checks = false\n'
        f'[[providers]]\nname = "standin"\napi_base = "{url}"\napi_key_env_var = "STANDIN_KEY"\n'
        '[[models]]\nname = "gpt-4.1"\nprovider = "standin"\nalias = "standin"\n'
    )
    return job.environ(STANDIN_KEY="dummy")


def test_vibe_installed_by_the_governor_asks_for_its_write_and_command_and_both_are_governed(
    job: Job,
) -> None:
    governor_installed("vibe")
    steps = [
        Call(("write_file",), {"file_path": str(job.workspace / "hello.txt"), "content": "hello\n"}),
        Call(("bash",), {"command": f"echo ran > {job.workspace}/ran.txt"}),
    ]
    with OpenAIStandIn(steps) as model:
        environ = vibe_home(job, model.url)
        stand_in = model.url.split("//")[1].split("/")[0]
        outcome = governor_run(
            "vibe", job.workspace, job.log, environ, "--env", "STANDIN_KEY", "--allow-host", stand_in
        )
    assert outcome["status"] == "completed", f"{outcome['reason']}\n{model.describe()}"
    assert model.tool_calls() == ["write_file", "bash"], model.describe()
    assert (job.workspace / "hello.txt").read_text() == "hello\n"
    assert (job.workspace / "ran.txt").read_text() == "ran\n"
    acp = outcome["acp"]
    assert acp["preset"] == "vibe" and acp["sandboxed_agent"] and not acp["decides_alone"]
    assert acp["mode"] == {"id": "ask", "name": "Ask", "asks": True}
    kinds = [(r["kind"], r.get("verdict")) for r in job.verified_log()]
    # asked, then written by the governor; asked, then run in a governed terminal
    assert [k for k in kinds if k[0] in ("permission", "write", "terminal")][:2] == [
        ("permission", "allow"), ("write", "allow")
    ]  # fmt: skip
    assert ("terminal", "allow") in kinds
    network = [k for k in kinds if k[0] == "network"]
    assert network and set(network) == {("network", "allow")}
    tally = acp["tally"]
    assert tally["refused"] == tally["unasked"] == 0 and tally["asked"] >= 2 + len(network)


async def test_vibe_s_sandbox_refuses_a_write_outside_and_holds_its_config_files_read_only(
    job: Job,
) -> None:
    vibe = governor_installed("vibe")
    outside = job.root / "outside"
    outside.mkdir()
    home = job.home
    (home / ".vibe").mkdir()
    (home / ".vibe" / "config.toml").write_text("# the person's\n")
    targets = {
        "outside": str(outside / "escape.txt"),
        "workspace": str(job.workspace / "in.txt"),
        "config": str(home / ".vibe" / "config.toml"),
        "hooks": str(home / ".vibe" / "hooks.toml"),
        "dotenv": str(home / ".vibe" / ".env"),
        "tools": str(home / ".vibe" / "tools") + "/",
        "agents-skills": str(home / ".agents" / "skills") + "/",
        "install": str(vibe.folder / "venv" / "pyvenv.cfg"),
        "log": str(home / ".vibe" / "logs.txt"),
    }
    said = await probe_in_its_sandbox(vibe, "vibe", job.workspace, home, targets)
    assert said["imports"].startswith(str(vibe.folder / "venv")), said
    # the allowed neighbours: its workspace, and its own home folder beside what runs code
    assert said["workspace"] == said["log"] == "written", said
    for name in ("outside", "config", "hooks", "dotenv", "tools", "agents-skills", "install"):
        assert said[name] != "written", (name, said)
    assert said["config"] == said["install"] == "Read-only file system", said
    assert not (outside / "escape.txt").exists()
    assert (home / ".vibe" / "config.toml").read_text() == "# the person's\n"
    assert not (home / ".vibe" / "hooks.toml").exists()  # its placeholder went with the sandbox
    assert not any((home / ".vibe" / "tools").iterdir())
