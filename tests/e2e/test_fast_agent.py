"""fast-agent 0.10.48 (``fast-agent-acp --shell``, PyPI ``fast-agent-mcp``),
installed by ``governor agents install fast-agent`` in a venv of its own, driven
through the real ``governor run --agent fast-agent`` against the loopback Chat
Completions stand-in as its ``generic`` provider (``GENERIC_BASE_URL``, a
base-URL variable of its preset: the job need not allow the host).

It asks before a write and a command, writes through the client's
``fs/write_text_file`` and, with ``--shell``, runs commands in the client's
terminals (``/bin/sh -lc LINE``). Its ACP mode ``agent`` says nothing of
asking. It keeps its sessions in ``./.fast-agent`` in its working directory,
the workspace, unasked: the outcome names each of those files.
"""

from __future__ import annotations

import pytest
from governor_agents import governor_installed, governor_run, probe_in_its_sandbox
from npm_agents import Job
from openai_standin import Call, OpenAIStandIn

pytestmark = [pytest.mark.e2e]


def test_fast_agent_installed_by_the_governor_asks_for_its_write_and_command_and_both_are_governed(
    job: Job,
) -> None:
    governor_installed("fast-agent")
    steps = [
        Call(("write_text_file",), {"path": str(job.workspace / "hello.txt"), "content": "hello\n"}),
        Call(("execute",), {"command": f"echo ran > {job.workspace}/ran.txt"}),
    ]
    with OpenAIStandIn(steps) as model:
        variables = {
            "GENERIC_BASE_URL": model.url,
            "GENERIC_API_KEY": "dummy",
            "FAST_AGENT_MODEL": "generic.gpt-4.1",
        }
        names = [word for name in variables for word in ("--env", name)]
        outcome = governor_run(
            "fast-agent", job.workspace, job.log, job.environ(**variables), *names
        )
    assert outcome["status"] == "completed", f"{outcome['reason']}\n{model.describe()}"
    assert model.tool_calls() == ["write_text_file", "execute"], model.describe()
    assert set(model.models()) == {"gpt-4.1"}, model.describe()
    assert (job.workspace / "hello.txt").read_text() == "hello\n"
    assert (job.workspace / "ran.txt").read_text() == "ran\n"
    acp = outcome["acp"]
    assert acp["preset"] == "fast-agent" and acp["sandboxed_agent"]
    records = job.verified_log()
    kinds = [(r["kind"], r.get("verdict")) for r in records]
    assert [k for k in kinds if k[0] in ("permission", "write")][:2] == [
        ("permission", "allow"), ("write", "allow")
    ]  # fmt: skip
    (ran, *_) = [r for r in records if r["kind"] == "terminal"]
    assert ran["verdict"] == "allow" and ran["subject"]["argv"][:2] == ["/bin/sh", "-lc"]
    network = [k for k in kinds if k[0] == "network"]
    assert network and set(network) == {("network", "allow")}
    # its session files, in the workspace's .fast-agent, are the only unasked changes
    unasked = acp["unasked_paths"]
    assert unasked and all(p.startswith(str(job.workspace / ".fast-agent") + "/") for p in unasked)
    assert acp["tally"]["refused"] == 0


async def test_fast_agent_s_sandbox_refuses_a_write_outside_and_holds_its_home_read_only(
    job: Job,
) -> None:
    agent = governor_installed("fast-agent")
    outside = job.root / "outside"
    outside.mkdir()
    home = job.home
    targets = {
        "outside": str(outside / "escape.txt"),
        "workspace": str(job.workspace / "in.txt"),
        "config": str(home / ".fast-agent" / "fast-agent.yaml"),
        "legacy-config": str(home / ".fast-agent" / "fastagent.config.yaml"),
        "plugins": str(home / ".fast-agent" / "plugins") + "/",
        "install": str(agent.folder / "venv" / "pyvenv.cfg"),
    }
    said = await probe_in_its_sandbox(agent, "fast_agent", job.workspace, home, targets)
    assert said["imports"].startswith(str(agent.folder / "venv")), said
    assert said["workspace"] == "written", said  # the allowed neighbour
    for name in ("outside", "config", "legacy-config", "plugins", "install"):
        assert said[name] != "written", (name, said)
    assert said["config"] == said["install"] == "Read-only file system", said
    assert not (outside / "escape.txt").exists()
    assert not any((home / ".fast-agent").iterdir())  # made empty for it, left empty
