"""The agents `governor agents install` itself puts in a data folder (the Python
ones in a venv each, Kilo from npm), and what the e2e tests need to drive them
through the real console script.

`.ci/agents` installs them with ``XDG_DATA_HOME=<repo>/.governor-agents``
(``ACP_GOVERNOR_INSTALLED_AGENTS`` names another folder), each under
``acp-governor/agents/<id>``. When one is missing the tests skip on a
developer's machine and fail under CI, as for the npm agents (`npm_agents`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from governor.agents.npm_installs import Installed, installed
from governor.agents.presets import find
from governor.confine.sandboxes import agent_profile
from governor.policies.policy import parse_policy
from governor.sandbox.run.agent import agent_process

REPO = Path(__file__).resolve().parents[2]
XDG_DATA = Path(os.environ.get("ACP_GOVERNOR_INSTALLED_AGENTS") or REPO / ".governor-agents")
"""The ``XDG_DATA_HOME`` `.ci/agents` installs the Python agents under."""
GOVERNOR = Path(sys.executable).parent / "governor"


def governor_installed(agent_id: str) -> Installed:
    """The agent `governor agents install` put under `XDG_DATA`, at its pin;
    skip (or fail under CI) when it is not there."""
    found = installed(find(agent_id), XDG_DATA / "acp-governor" / "agents")
    if not found.current:
        problem = (
            f"{agent_id} is not installed at its pin in {found.folder} "
            f"(run .ci/agents, or XDG_DATA_HOME={XDG_DATA} governor agents install {agent_id})"
        )
        if os.environ.get("CI"):
            pytest.fail(f"CI must install the real ACP agents: {problem}", pytrace=False)
        pytest.skip(problem)
    return found


def governor_run(
    agent_id: str,
    workspace: Path,
    log: Path,
    environ: Mapping[str, str],
    *flags: str,
    prompt: str = "Do the task.",
    data_home: bool = True,
) -> dict[str, Any]:
    """``governor run --agent ID --json`` through the console script, the agent
    found in its install under `XDG_DATA` (``data_home``: the governor's
    ``XDG_DATA_HOME`` names it; else ``environ``'s PATH must); its outcome."""
    argv = [str(GOVERNOR), "run", "--agent", agent_id, "--capability", "edit-workspace",
            "--workspace", str(workspace), "--log", str(log), "--timeout", "150", *flags,
            "--json", prompt]  # fmt: skip
    env = {**environ, "XDG_DATA_HOME": str(XDG_DATA)} if data_home else dict(environ)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    try:
        outcome: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        raise AssertionError(f"no outcome ({done.returncode}): {done.stderr[-3000:]}") from None
    return outcome


PROBE = r"""
import json, os, sys
out = {}
for name, path in json.loads(sys.argv[1]).items():
    try:
        if path.endswith("/"):
            with open(os.path.join(path, "planted.py"), "a") as f:
                f.write("x")
        else:
            with open(path, "a") as f:
                f.write("x")
        out[name] = "written"
    except OSError as e:
        out[name] = e.strerror
import importlib
out["imports"] = importlib.import_module(sys.argv[2]).__file__
print(json.dumps(out), flush=True)
"""


async def probe_in_its_sandbox(
    agent: Installed,
    module: str | None,
    workspace: Path,
    home: Path,
    targets: Mapping[str, str],
    program: Sequence[str] = (),
) -> dict[str, str]:
    """Run the agent's own interpreter (a Python agent's; else ``program``, the
    agent's argv, is what the profile is made for and the system's python3
    probes) under the very profile the governor gives the agent (its preset, its
    install, an edit-workspace policy), trying to write each of ``targets`` (a
    path ending in ``/`` is a folder: a file is made in it) and importing
    ``module`` from its install: what each said."""
    policy = parse_policy('capability = "edit-workspace"\n', "job.toml").bind(str(workspace))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home)}
    python = str(agent.folder / "venv" / "bin" / "python") if not program else "/usr/bin/python3"
    argv: Sequence[str] = [python, "-I", "-c", PROBE, json.dumps(targets), module or "json"]
    profile = agent_profile(program or argv, policy, agent.preset, env, sandbox=True)
    profile = dataclasses.replace(profile, egress=None)  # no proxy: no network at all
    async with agent_process(profile, argv, stdin=subprocess.DEVNULL, stderr=None) as child:
        assert child.stdout is not None
        said = b""
        with trio.fail_after(60):
            while not said.endswith(b"\n"):
                chunk = await child.stdout.receive_some(65536)
                if not chunk:
                    break
                said += chunk
    report: dict[str, str] = json.loads(said)
    return report
