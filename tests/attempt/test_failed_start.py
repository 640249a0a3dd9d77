"""An agent that dies at its start: the reason quotes its last meaningful stderr
lines, masked, and names the folder variables its sandbox does not show."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from governor.attempt.lifecycle import run_attempt
from governor.boundary.secrets import MASK
from governor.job.spec import AttemptSpec
from governor.policies.policy import parse_policy

EDIT = parse_policy('capability = "edit-workspace"', "test")
SECRET = "sk-ant-api03-" + "q" * 40

DIES = """
import os, sys
cache = os.environ["XDG_CACHE_HOME"]
sys.stderr.write("starting up\\n")
if not os.path.isdir(cache):
    sys.stderr.write(f"Error: cannot unpack into {cache}: ENOENT\\n")
    sys.stderr.write("the key was " + os.environ["ANTHROPIC_API_KEY"] + "\\n")
    sys.stderr.write('{\\n  "code": "ENOENT"\\n}\\n')
    sys.exit(1)
sys.stderr.write("cache found: waiting for initialize\\n")
sys.stdin.readline()
sys.stderr.write("goodbye\\n}\\n")
"""


def spec(tmp_path: Path, cache: Path, **kw: object) -> AttemptSpec:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    agent = tmp_path / "agent" / "dies.py"
    agent.parent.mkdir(exist_ok=True)
    agent.write_text(DIES)
    environ = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(cache),
        "ANTHROPIC_API_KEY": SECRET,
    }
    base: dict[str, object] = {
        "prompt": "do it",
        "argv": [sys.executable, str(agent)],
        "workspace": ws,
        "policy": EDIT,
        "log": tmp_path / "audit.jsonl",
        "timeout": 60,
        "environ": environ,
        "env": ["XDG_CACHE_HOME", "ANTHROPIC_API_KEY"],
    }
    base.update(kw)
    return AttemptSpec(**base)  # type: ignore[arg-type]


async def test_a_failed_start_quotes_its_last_lines_masked_and_names_the_hidden_folder(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"  # under /tmp, outside the workspace: hidden inside
    cache.mkdir()
    outcome = await run_attempt(spec(tmp_path, cache))
    assert outcome.status == "failed"
    reason = outcome.reason or ""
    assert f"was given XDG_CACHE_HOME={cache}, a folder its sandbox does not show" in reason
    # its last three lines with a letter in them: not the `}`, not the older `starting up`
    said = f'said: Error: cannot unpack into {cache}: ENOENT | the key was {MASK} | "code": "ENOENT"'
    assert reason.endswith(said), reason
    assert SECRET not in reason
    assert "ANTHROPIC_API_KEY" not in reason  # a secret's variable is not a folder


async def test_the_same_agent_starts_when_its_folder_is_inside_the_workspace(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "ws" / "cache"
    cache.mkdir(parents=True)
    outcome = await run_attempt(spec(tmp_path, cache))
    # it got past its start: the folder was there, and nothing names it
    assert "cannot unpack" not in (outcome.reason or ""), outcome.reason
    assert "XDG_CACHE_HOME" not in (outcome.reason or ""), outcome.reason


async def test_without_the_agent_sandbox_no_folder_is_blamed(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    outcome = await run_attempt(spec(tmp_path, cache, sandbox_agent=False))
    assert outcome.status == "failed"
    assert "cannot unpack" in (outcome.reason or "")  # it is missing on the host too
    assert "XDG_CACHE_HOME=" not in (outcome.reason or "")
